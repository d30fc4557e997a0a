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
    # Nanoseconds, as LocalAI's faster-whisper backend sends them.
    assert (r.segments[1].start, r.segments[1].end) == (1_500_000_000, 2_250_000_000)
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


def test_words_use_localai_transcript_word(tmp_path):
    s, audio = loaded(tmp_path)
    words = [types.SimpleNamespace(word=" hel", start=0.25, end=0.5), types.SimpleNamespace(word="lo", start=0.5, end=1.0)]
    segment = backend.to_segment(0, types.SimpleNamespace(text=" hello", start=0.0, end=1.5, tokens=[], words=words))
    wire = backend_pb2.TranscriptSegment.FromString(segment.SerializeToString())
    assert [(w.start, w.end, w.text) for w in wire.words] == [(250_000_000, 500_000_000, " hel"), (500_000_000, 1_000_000_000, "lo")]
    # LocalAI's field numbers: start=1, end=2, text=3.
    fields = {f.name: f.number for f in backend_pb2.TranscriptWord.DESCRIPTOR.fields}
    assert fields == {"start": 1, "end": 2, "text": 3}
