"""The seed rows' linux/arm64 CPU artifacts (bark, rfdetr: `:cpu-arm64`, cross-built on x86_64),
served by an aarch64 CPython 3.11 under qemu-aarch64-static through their run.sh.

Each server is healthy and its library imports on aarch64 inside the artifact (torchvision's
aarch64 extension library loads and runs an op). No model is loaded here: bark's tiny random
model is served by test_bark_arm64_emulated.py, rfdetr's by test_rfdetr_arm64_emulated.py. chatterbox:cpu-arm64 is refused (its BUILD says why). Emulated
timings are emulation's, never arm64's."""
from __future__ import annotations

import os
import subprocess

import pytest

from tests.integration.aarch64_python import python_on_path
from tests.integration.backend_process import BackendProcess, dist_path, pex_distributions, pex_path, pex_root
from tests.integration.rpc_checks import assert_healthy

EMULATED = 1800  # seconds: importing torch under qemu-user takes minutes
# What each artifact must import on aarch64 (beyond its backend module).
IMPORTS = {
    "bark": "import torch, transformers; from transformers import BarkModel",
    "rfdetr": "import torch, torchvision, rfdetr; torchvision.ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)",
}


@pytest.fixture(scope="module")
def qemu_path(tmp_path_factory) -> str:
    return f"{python_on_path(tmp_path_factory.mktemp('qemu-bin'))}:{os.environ['PATH']}"


@pytest.mark.parametrize("backend", sorted(IMPORTS))
def test_artifact_holds_aarch64_torch_family_and_imports_under_qemu(backend, qemu_path) -> None:
    pex = pex_path(backend, "cpu-arm64")
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
