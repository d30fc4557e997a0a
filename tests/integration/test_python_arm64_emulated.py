"""The Python-only backends' linux/arm64 CPU artifacts (`:cpu-arm64`, cross-built on x86_64)
served by an aarch64 CPython 3.11 under qemu-aarch64-static through their run.sh.

Each artifact holds only aarch64 or pure wheels (torch 2.9.1 aarch64 where the backend has torch)
and no nvidia/triton package, and its server is healthy over gRPC. transformers' model: test_transformers_arm64_emulated.py.
No model is loaded in the others: silero-vad's, faster-whisper's and kitten-tts's onnxruntime
1.32.0 segfaults at import under qemu-user (its cpuinfo start-up reads the x86_64 host's
/sys/devices/system/cpu cache topology, which qemu-user shows the guest; docs/arm64.md), and
diffusers/kokoro have no model that can be made offline at a size emulation runs in minutes.
Emulated timings are emulation's, never arm64's."""
from __future__ import annotations

import os

import pytest

from tests.integration.aarch64_python import python_on_path
from tests.integration.backend_process import BackendProcess, dist_path, pex_distributions, pex_path
from tests.integration.rpc_checks import assert_healthy

EMULATED = 1800  # seconds: importing torch under qemu-user takes minutes
# backend -> whether its artifact carries torch (PyPI's aarch64 2.9.1, the CPU build)
BACKENDS = {
    "diffusers": True,
    "faster-whisper": False,
    "kitten-tts": False,
    "kokoro": True,
    "silero-vad": True,
    "transformers": True,
}


@pytest.fixture(scope="module")
def qemu_env(tmp_path_factory) -> dict[str, str]:
    # qemu's default `max` CPU has SVE, on which oneDNN's JIT dies with SIGILL under qemu
    # (test_bark_arm64_emulated.py); Neoverse-N1 is ARMv8.2 without SVE (Graviton 2, Altra).
    return {"PATH": f"{python_on_path(tmp_path_factory.mktemp('qemu-bin'))}:{os.environ['PATH']}", "QEMU_CPU": "neoverse-n1"}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_artifact_holds_only_aarch64_or_pure_wheels(backend) -> None:
    dists = pex_distributions(pex_path(backend, "cpu-arm64"))
    assert not [d for d in dists if "x86_64" in d or d.lower().startswith(("nvidia", "triton", "cuda"))], dists
    torch = [d for d in dists if d.startswith("torch-")]
    if BACKENDS[backend]:
        assert [d for d in torch if d.startswith("torch-2.9.1-") and "aarch64" in d] == torch and torch, dists
    else:
        assert torch == [], dists


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_server_is_healthy_under_qemu(backend, qemu_env) -> None:
    server = BackendProcess(backend, "cpu-arm64", env=qemu_env)
    try:
        server.wait_healthy(timeout=EMULATED)
        assert_healthy(server.stub)
    finally:
        server.stop()

