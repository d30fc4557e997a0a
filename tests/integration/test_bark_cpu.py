"""backends/bark:cpu, packaged by Pants, started as LocalAI starts it, called over gRPC.

The model is a random 1-layer BarkModel with a tiny tokenizer and one voice preset, made in
the test (tiny_models.tiny_bark): real Bark file formats, transformers' own Bark code path
(semantic -> coarse -> fine -> Encodec decode), no hub download.
"""
from __future__ import annotations

import wave

import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, pex_distributions, pex_path
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.rpc_checks import Code, assert_healthy, expect_code, state
from tests.integration.tiny_models import BARK_VOICE, tiny_bark


@pytest.fixture(scope="module")
def server():
    with BackendProcess("bark") as proc:
        yield proc


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_bark(tmp_path_factory.mktemp("tiny-bark"))


@pytest.fixture(scope="module")
def loaded(server, model):
    res = server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model)), timeout=300)
    assert res.success, res.message
    return server


def tts(dst, **kw) -> backend_pb2.TTSRequest:
    return backend_pb2.TTSRequest(**{"text": "hello world", "dst": str(dst), **kw})


def read_wav(path):
    with wave.open(str(path), "rb") as w:
        return w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes(), w.readframes(w.getnframes())


def test_artifact_has_cpu_torch_and_no_cuda_bark_or_torchaudio() -> None:
    dists = pex_distributions(pex_path("bark", "cpu"))
    assert any(d.startswith("torch-2.13.0+cpu-") for d in dists), dists
    assert any(d.startswith("transformers-") for d in dists), dists
    bad = [d for d in dists if d.lower().startswith(("nvidia", "cuda", "triton", "torchaudio", "encodec", "bark-", "suno"))]
    assert bad == []


def test_tts_before_load_is_failed_precondition(server, tmp_path) -> None:
    expect_code(Code.FAILED_PRECONDITION, server.stub.TTS, tts(tmp_path / "o.wav"))
    assert not (tmp_path / "o.wav").exists()


def test_missing_model_dir_is_not_found_and_server_keeps_serving(server, tmp_path) -> None:
    err = expect_code(Code.NOT_FOUND, server.stub.LoadModel, backend_pb2.ModelOptions(Model=str(tmp_path / "no-bark")))
    assert "no-bark" in err.details()
    assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED
    assert_healthy(server.stub)


def test_bad_model_files_answer_clearly(server, tmp_path) -> None:
    assert_bad_models_answer_clearly(server.stub, tmp_path)


@pytest.mark.parametrize("voice", ["", BARK_VOICE, "my-voice.npz"], ids=["no-voice", "preset", "npz-file"])
def test_tts_writes_a_24khz_wav(loaded, tmp_path, voice) -> None:
    dst = tmp_path / "out.wav"
    res = loaded.stub.TTS(tts(dst, voice=voice), timeout=300)
    assert res.success, res.message
    channels, width, rate, frames, data = read_wav(dst)
    assert (channels, width, rate) == (1, 2, 24_000)
    assert frames > 0 and len(data) == 2 * frames
    assert any(data), "the WAV holds only silence"


def test_malformed_voice_file_is_invalid_argument(loaded, tmp_path) -> None:
    """The voice reaches BarkProcessor: a .npz without Bark's prompt shapes is refused."""
    import numpy as np

    np.savez(tmp_path / "bad.npz", semantic_prompt=np.zeros((2, 2), dtype=np.int64))
    err = expect_code(Code.INVALID_ARGUMENT, loaded.stub.TTS, tts(tmp_path / "o.wav", voice=str(tmp_path / "bad.npz")))
    assert "bad.npz" in err.details()
    assert_healthy(loaded.stub)


def test_unknown_voice_is_not_found_naming_the_presets(loaded, tmp_path) -> None:
    err = expect_code(Code.NOT_FOUND, loaded.stub.TTS, tts(tmp_path / "o.wav", voice="v2/xx_speaker_9"))
    assert "v2/xx_speaker_9" in err.details() and BARK_VOICE in err.details()
    assert not (tmp_path / "o.wav").exists()
    assert_healthy(loaded.stub)


@pytest.mark.parametrize("text", ["", "  \n"], ids=["empty", "blank"])
def test_empty_text_is_invalid_argument(loaded, tmp_path, text) -> None:
    expect_code(Code.INVALID_ARGUMENT, loaded.stub.TTS, tts(tmp_path / "o.wav", text=text))
    assert not (tmp_path / "o.wav").exists()
    assert_healthy(loaded.stub)


def test_unwritable_dst_is_permission_denied(loaded) -> None:
    # sysfs refuses new files to every user, root included (a chmod'ed directory does not stop root).
    err = expect_code(Code.PERMISSION_DENIED, loaded.stub.TTS, tts("/sys/localai-bark-test.wav"))
    assert "/sys/localai-bark-test.wav" in err.details()
    assert_healthy(loaded.stub)


def test_dst_that_is_a_directory_or_has_no_directory(loaded, tmp_path) -> None:
    expect_code(Code.INVALID_ARGUMENT, loaded.stub.TTS, tts(tmp_path))
    expect_code(Code.NOT_FOUND, loaded.stub.TTS, tts(tmp_path / "no" / "dir" / "o.wav"))
    assert_healthy(loaded.stub)
    assert state(loaded.stub) == backend_pb2.StatusResponse.READY


def test_still_serves_after_the_bad_requests(loaded, tmp_path) -> None:
    res = loaded.stub.TTS(tts(tmp_path / "last.wav", voice=BARK_VOICE), timeout=300)
    assert res.success and read_wav(tmp_path / "last.wav")[3] > 0
