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


def test_generation_fits_the_context():
    import types

    from backends.common import llm
    from backends.common.errors import InvalidArgument

    assert llm.context_length(types.SimpleNamespace(n_positions=128)) == 128
    assert llm.context_length(types.SimpleNamespace(max_position_embeddings=4096, n_positions=128)) == 4096
    assert llm.context_length(types.SimpleNamespace()) is None
    assert llm.max_new_tokens(10, 0, None) == 512
    assert llm.max_new_tokens(10, 0, 128) == 118  # the default shortened to fit
    assert llm.max_new_tokens(10, 118, 128) == 118
    with pytest.raises(InvalidArgument, match="Tokens=119 with a 10-token prompt exceeds the model's context of 128"):
        llm.max_new_tokens(10, 119, 128)
    with pytest.raises(InvalidArgument, match="prompt is 128 tokens; the model's context is 128 tokens"):
        llm.max_new_tokens(128, 0, 128)
