import wave

import pytest

from backends.common.audio import validate_tts, write_wav
from backends.common.errors import InvalidArgument, NotFound
from backends.common.llm import truncate_at_stop, validate_predict
from backends.proto import backend_pb2


def test_tts_validation(tmp_path):
    validate_tts(backend_pb2.TTSRequest(text="hi", dst=str(tmp_path / "o.wav")))
    with pytest.raises(InvalidArgument):
        validate_tts(backend_pb2.TTSRequest(text="  ", dst=str(tmp_path / "o.wav")))
    with pytest.raises(InvalidArgument):
        validate_tts(backend_pb2.TTSRequest(text="hi"))
    with pytest.raises(NotFound):
        validate_tts(backend_pb2.TTSRequest(text="hi", dst=str(tmp_path / "x" / "o.wav")))


def test_write_wav(tmp_path):
    path = str(tmp_path / "o.wav")
    write_wav(path, [0.0, 0.5, -2.0], 24000)
    with wave.open(path) as w:
        assert (w.getframerate(), w.getnframes(), w.getsampwidth()) == (24000, 3, 2)
    with pytest.raises(InvalidArgument):
        write_wav(path, [], 24000)


def test_llm_helpers():
    with pytest.raises(InvalidArgument):
        validate_predict(backend_pb2.PredictOptions())
    assert truncate_at_stop("a</s>b", ["</s>"]) == "a"
