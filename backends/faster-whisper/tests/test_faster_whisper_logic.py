import types

import pytest

from backends.common.errors import InvalidArgument, NotFound
from backends.common.testing import FakeContext, load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


def seg(text, start, end):
    return types.SimpleNamespace(text=text, start=start, end=end, tokens=[1, 2], words=None)


class FakeWhisper:
    def transcribe(self, path, **kwargs):
        def gen():  # lazy, like faster-whisper's
            yield seg(" hello", 0.0, 1.5)
            yield seg(" world", 1.5, 2.25)
        return gen(), types.SimpleNamespace(language="en", duration=2.25)


def loaded(tmp_path):
    s = backend.FasterWhisperServicer()
    s.model = FakeWhisper()
    audio = tmp_path / "a.wav"
    audio.write_bytes(b"RIFF")
    return s, str(audio)


def test_segments_from_generator_reach_the_reply(tmp_path):
    s, audio = loaded(tmp_path)
    r = s.AudioTranscription(backend_pb2.TranscriptRequest(dst=audio), FakeContext())
    assert [x.text for x in r.segments] == [" hello", " world"]
    assert (r.segments[1].start, r.segments[1].end) == (1500, 2250)
    assert r.text == "hello world" and r.language == "en"


def test_stream_sends_deltas_then_final(tmp_path):
    s, audio = loaded(tmp_path)
    msgs = list(s.AudioTranscriptionStream(backend_pb2.TranscriptRequest(dst=audio), FakeContext()))
    assert [m.delta for m in msgs[:2]] == [" hello", " world"]
    assert msgs[-1].HasField("final_result") and len(msgs[-1].final_result.segments) == 2


def test_validation(tmp_path):
    with pytest.raises(InvalidArgument):
        backend.validate_transcript(backend_pb2.TranscriptRequest())
    with pytest.raises(NotFound, match="nope.wav"):
        backend.validate_transcript(backend_pb2.TranscriptRequest(dst=str(tmp_path / "nope.wav")))


def test_compute_type():
    assert backend.compute_type_for("cpu", environ={}) == "int8"
    assert backend.compute_type_for("cpu", environ={"LOCALAI_WHISPER_COMPUTE_TYPE": "float32"}) == "float32"
    with pytest.raises(InvalidArgument):
        backend.compute_type_for("cpu", environ={"LOCALAI_WHISPER_COMPUTE_TYPE": "float16"})
    assert backend.compute_type_for("cuda", environ={}) == "float16"
