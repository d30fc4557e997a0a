"""coqui's linux/arm64 CPU folder (`backends/coqui:cpu-arm64`, cross-built on x86_64) under
qemu-aarch64-static: it carries the monotonic-alignment-search wheel 3rdparty/wheelhouse.toml
cross-builds with zig (PyPI has no Linux aarch64 wheel of it), its server answers Health through
run.sh, and that wheel's Cython extension, run by the folder's own torch and numpy, finds the same
monotonic alignment as the package's pure-NumPy implementation. No TTS model is loaded: coqui's
models are downloads. Emulated timings are emulation's, never arm64's."""
from __future__ import annotations

import os
import subprocess

from tests.integration.aarch64_python import emulated_env, python_argv
from tests.integration.backend_process import BackendProcess, dist_path, pex_distributions, pex_path
from tests.integration.rpc_checks import assert_healthy

EMULATED = 900  # seconds: torch under qemu-user

ALIGNMENT = """
import torch
from monotonic_alignment_search import maximum_path
import monotonic_alignment_search.core as core
assert core.__file__.endswith(".cpython-311-aarch64-linux-gnu.so"), core.__file__
torch.manual_seed(0)
value = torch.rand(2, 5, 9)
mask = torch.ones(2, 5, 9)
mask[1, :, 7:] = 0
cython, numpy = maximum_path(value, mask, "cython"), maximum_path(value, mask, "numpy")
assert torch.equal(cython, numpy), (cython, numpy)
print("alignment", int(cython.sum().item()))
"""


def test_the_folder_carries_the_cross_built_wheel() -> None:
    dists = pex_distributions(pex_path("coqui", "cpu-arm64"))
    assert "monotonic_alignment_search-0.2.1-cp311-cp311-manylinux_2_28_aarch64.whl" in dists, dists
    assert not [d for d in dists if "x86_64" in d or d.lower().startswith(("nvidia", "triton", "cuda"))], dists


def test_server_is_healthy_under_qemu(tmp_path) -> None:
    server = BackendProcess("coqui", "cpu-arm64", env={**emulated_env(tmp_path / "qemu-bin"), "QEMU_CPU": "neoverse-n1"})
    try:
        server.wait_healthy(timeout=EMULATED)
        assert_healthy(server.stub)
    finally:
        server.stop()


def test_the_cython_alignment_equals_numpys_under_qemu() -> None:
    site = dist_path("coqui", "cpu-arm64", "site-packages")
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site.resolve()), "QEMU_CPU": "neoverse-n1"}
    out = subprocess.run([*python_argv(), "-c", ALIGNMENT], env=env, capture_output=True, text=True, timeout=EMULATED)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "alignment 16" in out.stdout, out.stdout
