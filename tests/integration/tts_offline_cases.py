"""Offline test cases shared by test_kokoro_cpu.py and test_kitten_tts_cpu.py: the packaged
TTS backend started as LocalAI starts it, called over gRPC. A test module imports these cases
and defines a module-scoped ``backend_name`` fixture.

Checked here, with no model: the artifact starts and answers Health, Status, argument
validation (empty text, missing dst, missing output directory), model RPCs before LoadModel,
LoadModel of a missing path and of bad model files (bad_model_cases.py), and that a failed hub
download (Kokoro-82M and KittenTTS come from the Hugging Face hub, unreachable here) is
FAILED_PRECONDITION, not a crash. Synthesis is tested by each module with a random-weight model
made in the test (tiny_models.tiny_kitten_tts, tiny_models.tiny_kokoro; tts_synthesis.py).
"""
from __future__ import annotations

import grpc
import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, pex_distributions, pex_path
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.rpc_checks import Code, assert_healthy, expect_code, state


@pytest.fixture(scope="module")
def server(backend_name):
    with BackendProcess(backend_name) as proc:
        proc.name = backend_name
        yield proc


def tts(dst, **kw) -> backend_pb2.TTSRequest:
    return backend_pb2.TTSRequest(**{"text": "Hello world.", "dst": str(dst), **kw})


def tts_with(tmp_path, **fields) -> backend_pb2.TTSRequest:
    return backend_pb2.TTSRequest(**{"text": "Hello world.", "dst": str(tmp_path / "o.wav"), **fields})


def test_artifact_has_no_cuda_package(backend_name) -> None:
    dists = pex_distributions(pex_path(backend_name, "cpu"))
    assert [d for d in dists if d.lower().startswith(("nvidia", "cuda", "triton"))] == []


def test_health_and_status_before_any_model(server) -> None:
    assert_healthy(server.stub)
    assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED


def test_tts_before_load_is_failed_precondition(server, tmp_path) -> None:
    expect_code(Code.FAILED_PRECONDITION, server.stub.TTS, tts(tmp_path / "o.wav"))
    assert not (tmp_path / "o.wav").exists()
    assert_healthy(server.stub)


@pytest.mark.parametrize("fields", [dict(text=""), dict(text="   \n"), dict(dst="")], ids=["empty", "blank", "no-dst"])
def test_bad_tts_arguments_are_invalid_argument(server, tmp_path, fields) -> None:
    expect_code(Code.INVALID_ARGUMENT, server.stub.TTS, tts_with(tmp_path, **fields))
    assert_healthy(server.stub)


def test_missing_output_directory_is_not_found(server, tmp_path) -> None:
    expect_code(Code.NOT_FOUND, server.stub.TTS, tts(tmp_path / "no" / "dir" / "o.wav"))
    assert_healthy(server.stub)


def test_load_of_a_missing_path_is_not_found(server, tmp_path) -> None:
    err = expect_code(Code.NOT_FOUND, server.stub.LoadModel, backend_pb2.ModelOptions(Model=str(tmp_path / "nope")))
    assert "nope" in err.details()
    expect_code(Code.NOT_FOUND, server.stub.LoadModel, backend_pb2.ModelOptions(Model="nope.pth", ModelPath=str(tmp_path)))
    assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED
    assert_healthy(server.stub)


def test_default_model_download_offline_fails_with_a_status_and_server_survives(server) -> None:
    """Empty Model means the default hub model; offline (HF_HUB_OFFLINE=1) the download fails:
    FAILED_PRECONDITION (model_files.load_failure) saying to name a local copy, then Health OK
    and no model."""
    with pytest.raises(grpc.RpcError) as info:
        server.stub.LoadModel(backend_pb2.ModelOptions(Model=""), timeout=300)
    assert info.value.code() != Code.OK and info.value.details()
    print(server.name, "offline default LoadModel ->", info.value.code(), info.value.details()[:300])
    assert info.value.code() == Code.FAILED_PRECONDITION, info.value.details()
    assert "cannot load" in info.value.details() and "local path" in info.value.details()
    assert_healthy(server.stub)
    assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED


# What each backend's model file is called: the bad files carry it, so their bytes are judged.
MODEL_FILE_NAMES = {"kokoro": "kokoro-v1_0.pth", "kitten-tts": "kitten_tts_nano_v0_2.onnx"}


def test_bad_model_files_answer_clearly(server, tmp_path, backend_name) -> None:
    assert_bad_models_answer_clearly(server.stub, tmp_path, file_name=MODEL_FILE_NAMES[backend_name])
