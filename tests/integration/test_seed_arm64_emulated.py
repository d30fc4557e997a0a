"""The seed rows' linux/arm64 CPU artifacts (bark, chatterbox, rfdetr: `:cpu-arm64`, cross-built
on x86_64), served by an aarch64 CPython 3.11 under qemu-aarch64-static through their run.sh.

bark serves a real TTS answer from a random 1-layer BarkModel made here (tiny_models.tiny_bark);
chatterbox and rfdetr have no model that can be made offline here (ChatterboxTTS.from_local needs
its trained voice encoder, T3 and S3Gen files; RF-DETR's classes fetch DINOv2 weights), so for
them the check is that the server is healthy and their libraries import on aarch64 inside the
artifact (torchaudio's and torchvision's aarch64 extension libraries load). Emulated timings are
emulation's, never arm64's."""
from __future__ import annotations

import os
import subprocess
import wave

import pytest

from backends.proto import backend_pb2
from tests.integration.aarch64_python import python_on_path
from tests.integration.backend_process import BackendProcess, dist_path, pex_distributions, pex_root
from tests.integration.rpc_checks import assert_healthy
from tests.integration.tiny_models import BARK_VOICE, tiny_bark

EMULATED = 1800  # seconds: importing torch under qemu-user takes minutes
# What each artifact must import on aarch64 (beyond its backend module).
IMPORTS = {
    "bark": "import torch, transformers; from transformers import BarkModel",
    "chatterbox": "import torch, torchaudio, chatterbox.tts; torchaudio.functional.resample(torch.zeros(1, 160), 16000, 8000)",
    "rfdetr": "import torch, torchvision, rfdetr; torchvision.ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)",
}


@pytest.fixture(scope="module")
def qemu_path(tmp_path_factory) -> str:
    return f"{python_on_path(tmp_path_factory.mktemp('qemu-bin'))}:{os.environ['PATH']}"


@pytest.mark.parametrize("backend", sorted(IMPORTS))
def test_artifact_holds_aarch64_torch_family_and_imports_under_qemu(backend, qemu_path) -> None:
    pex = dist_path(backend, "cpu-arm64", "backend.pex")
    dists = pex_distributions(pex)
    assert [d for d in dists if d.startswith("torch-") and "aarch64" in d], dists
    assert not [d for d in dists if "x86_64" in d or d.lower().startswith(("nvidia", "triton"))], dists
    env = {**os.environ, "PATH": qemu_path, "PEX_ROOT": str(pex_root()), "PEX_INTERPRETER": "1", "HF_HUB_OFFLINE": "1"}
    script = f"import platform; {IMPORTS[backend]}; print(platform.machine())"
    run = subprocess.run([str(pex / "__main__.py"), "-c", script], env=env, capture_output=True, text=True, timeout=EMULATED)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.strip().splitlines()[-1] == "aarch64"


@pytest.mark.parametrize("backend", sorted(IMPORTS))
def test_server_is_healthy_under_qemu(backend, qemu_path) -> None:
    server = BackendProcess(backend, "cpu-arm64", env={"PATH": qemu_path})
    try:
        server.wait_healthy(timeout=EMULATED)
        assert_healthy(server.stub)
    finally:
        server.stop()


def test_bark_speaks_under_qemu(qemu_path, tmp_path) -> None:
    server = BackendProcess("bark", "cpu-arm64", env={"PATH": qemu_path})
    try:
        server.wait_healthy(timeout=EMULATED)
        res = server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(tiny_bark(tmp_path / "tiny-bark"))), timeout=EMULATED)
        assert res.success, res.message + server.output()
        dst = tmp_path / "out.wav"
        res = server.stub.TTS(backend_pb2.TTSRequest(text="hello world", dst=str(dst), voice=BARK_VOICE), timeout=EMULATED)
        assert res.success, res.message
        with wave.open(str(dst), "rb") as w:
            assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24_000)
            assert w.getnframes() > 0 and any(w.readframes(w.getnframes()))
        assert_healthy(server.stub)
    finally:
        server.stop()
