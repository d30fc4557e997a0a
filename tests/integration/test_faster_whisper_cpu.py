"""backends/faster-whisper:cpu, packaged by Pants, started as LocalAI starts it, called over gRPC.

The model is a 1-layer random Whisper built with transformers in the test and converted to
CTranslate2 (what faster-whisper loads); the audio is a WAV written in the test. With random
weights the transcript text is arbitrary, so it is NOT checked: the tests check what random
weights cannot change (the call succeeds, the duration of the audio, the language we force,
segment structure, the stream ending with a final_result that agrees with its deltas) and the
error codes.
"""
from __future__ import annotations

import wave

import numpy as np
import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.rpc_checks import Code, assert_healthy, expect_code, second_load_is_aborted, state
from tests.integration.tiny_models import SAMPLE_RATE, espeak_voice, synthetic_voice, tiny_whisper_ct2, write_wav

SECONDS = 4.0


@pytest.fixture(scope="module")
def server():
    with BackendProcess("faster-whisper") as proc:
        yield proc


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_whisper_ct2(tmp_path_factory.mktemp("whisper") / "tiny-whisper")


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory):
    """About SECONDS of speech (espeak-ng when present, else a synthetic voice) as 16 kHz WAV."""
    voice = espeak_voice("Hello world, this is a test of voice transcription.")
    if voice is None:
        voice = synthetic_voice(3.0)
    audio = np.zeros(int(SECONDS * SAMPLE_RATE), np.float32)
    audio[SAMPLE_RATE // 2 : SAMPLE_RATE // 2 + min(len(voice), len(audio) - SAMPLE_RATE // 2)] = voice[: len(audio) - SAMPLE_RATE // 2]
    return write_wav(tmp_path_factory.mktemp("audio") / "speech.wav", audio)


def request(path, **kw) -> backend_pb2.TranscriptRequest:
    return backend_pb2.TranscriptRequest(dst=str(path), **kw)


def test_transcribe_before_load_is_failed_precondition(server, speech_wav) -> None:
    expect_code(Code.FAILED_PRECONDITION, server.stub.AudioTranscription, request(speech_wav))
    expect_code(Code.FAILED_PRECONDITION, server.stub.AudioTranscriptionStream, request(speech_wav))
    assert_healthy(server.stub)


def test_load_model_errors(server, tmp_path) -> None:
    err = expect_code(Code.NOT_FOUND, server.stub.LoadModel, backend_pb2.ModelOptions(Model=str(tmp_path / "nope")))
    assert "nope" in err.details()
    expect_code(Code.NOT_FOUND, server.stub.LoadModel, backend_pb2.ModelOptions(Model="nope", ModelPath=str(tmp_path)))
    expect_code(Code.INVALID_ARGUMENT, server.stub.LoadModel, backend_pb2.ModelOptions(Model=""))
    assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED
    assert_healthy(server.stub)


def test_bad_model_files_answer_clearly(server, tmp_path) -> None:
    assert_bad_models_answer_clearly(server.stub, tmp_path)


def test_second_load_while_one_is_in_flight_is_aborted(server, model, speech_wav) -> None:
    second_load_is_aborted(
        server.stub,
        backend_pb2.ModelOptions(Model=model.name, ModelPath=str(model.parent)),
        model_rpc=lambda: server.stub.AudioTranscription(request(speech_wav), timeout=120),
    )
    assert_healthy(server.stub)


@pytest.fixture(scope="module")
def loaded(server, model):
    res = server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model)), timeout=300)
    assert res.success, res.message
    return server


def check_result(result: backend_pb2.TranscriptResult, language: str) -> None:
    assert result.duration == pytest.approx(SECONDS, abs=0.05)
    assert result.language == language
    assert result.text == "".join(s.text for s in result.segments).strip()
    for i, seg in enumerate(result.segments):
        assert seg.id == i
        assert 0 <= seg.start <= seg.end <= int((SECONDS + 0.05) * 1e9)  # nanoseconds
        assert all(isinstance(t, int) for t in seg.tokens)


def test_transcription_succeeds_with_duration_and_language(loaded, speech_wav) -> None:
    res = loaded.stub.AudioTranscription(request(speech_wav, language="en"), timeout=300)
    check_result(res, "en")


def test_stream_ends_with_a_final_result_matching_its_deltas(loaded, speech_wav) -> None:
    msgs = list(loaded.stub.AudioTranscriptionStream(request(speech_wav, language="en"), timeout=300))
    assert msgs, "empty stream"
    *deltas, last = msgs
    assert last.HasField("final_result"), "the stream must end with final_result"
    assert not any(m.HasField("final_result") for m in deltas)
    check_result(last.final_result, "en")
    # One delta per segment, in order (segments are not lost between stream and result).
    assert [m.delta for m in deltas] == [s.text for s in last.final_result.segments]


def test_options_are_accepted(loaded, speech_wav) -> None:
    """Language detection, translate, temperature, prompt, word timestamps: the call succeeds.
    CTranslate2 sees the tiny model as English-only, so faster-whisper answers "en" whatever
    language is asked for: the language passed through cannot be checked with it."""
    res = loaded.stub.AudioTranscription(request(speech_wav), timeout=300)
    check_result(res, "en")
    res = loaded.stub.AudioTranscription(
        request(speech_wav, language="de", translate=True, temperature=0.2, prompt="hello",
                timestamp_granularities=["word"]),
        timeout=300,
    )
    check_result(res, "en")


def test_stereo_44k_wav_is_resampled(loaded, tmp_path) -> None:
    path = tmp_path / "stereo.wav"
    n = int(2.0 * 44100)
    left = (0.3 * np.sin(2 * np.pi * 220 * np.arange(n) / 44100)).astype(np.float32)
    pcm = (np.stack([left, -left], axis=1) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(44100)
        w.writeframes(pcm.tobytes())
    res = loaded.stub.AudioTranscription(request(path, language="en"), timeout=300)
    assert res.duration == pytest.approx(2.0, abs=0.05)


def test_missing_or_empty_audio_path(loaded, speech_wav, tmp_path) -> None:
    expect_code(Code.INVALID_ARGUMENT, loaded.stub.AudioTranscription, request(""))
    expect_code(Code.NOT_FOUND, loaded.stub.AudioTranscription, request(tmp_path / "nope.wav"))
    expect_code(Code.NOT_FOUND, loaded.stub.AudioTranscriptionStream, request(tmp_path / "nope.wav"))
    expect_code(Code.INVALID_ARGUMENT, loaded.stub.AudioTranscription, request(speech_wav, temperature=-1.0))
    assert_healthy(loaded.stub)


def _png(path):
    from PIL import Image

    Image.new("RGB", (8, 8)).save(path, format="PNG")


def _no_frames_wav(path):
    write_wav(path, np.zeros(0, np.float32))


@pytest.mark.parametrize(
    "make",
    [
        lambda p: p.write_bytes(b"this is not audio\n" * 50),
        lambda p: p.write_bytes(b""),
        _png,
    ],
    ids=["text-file", "empty-file", "png-image"],
)
def test_a_non_audio_file_is_invalid_argument(loaded, speech_wav, tmp_path, make) -> None:
    bad = tmp_path / "notes.wav"
    make(bad)
    err = expect_code(Code.INVALID_ARGUMENT, loaded.stub.AudioTranscription, request(bad))
    assert str(bad) in err.details()
    expect_code(Code.INVALID_ARGUMENT, loaded.stub.AudioTranscriptionStream, request(bad))
    assert_healthy(loaded.stub)
    # Still serving.
    assert loaded.stub.AudioTranscription(request(speech_wav, language="en"), timeout=300).duration > 0


def test_a_wav_without_samples_gives_an_empty_transcript(loaded, tmp_path) -> None:
    path = tmp_path / "empty.wav"
    _no_frames_wav(path)
    res = loaded.stub.AudioTranscription(request(path), timeout=300)
    assert res.duration == 0 and list(res.segments) == [] and res.text == ""
