"""Index isolation, end to end with real `pants generate-lockfiles` in a temporary repository.

Two find-links folders stand in for the two indexes: `pypi/` (global, like PyPI's CUDA torch)
and the CPU wheelhouse (only in the cpu accelerator's pip options). PEP 440 lets
`demo-torch==2.13.0` match `2.13.0+cpu`, and pip prefers the local version: a resolve that could
see the wheelhouse would lock the CPU wheel.
"""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.integration.temp_repo import declare_backend, local_index_options, make_temp_repo, resolve_options, run_pants, write_wheel


def locked_versions(lockfile: Path) -> dict[str, str]:
    body = "\n".join(l for l in lockfile.read_text().splitlines() if not l.startswith("//"))
    reqs = json.loads(body)["locked_resolves"][0]["locked_requirements"]
    return {r["project_name"]: r["version"] for r in reqs}


@pytest.fixture
def repo(tmp_path) -> tuple[Path, list[str]]:
    repo = make_temp_repo(tmp_path / "repo")
    wheelhouse = repo / ".wheelhouse"
    write_wheel(wheelhouse / "cpu", "demo-torch", "2.13.0+cpu")
    write_wheel(repo / ".pypi", "demo-torch", "2.13.0")
    write_wheel(repo / ".pypi", "grpcio-tools", "1.85.1")
    return repo, local_index_options(repo)


def test_cuda_resolve_cannot_lock_the_cpu_wheel(repo) -> None:
    path, options = repo
    declare_backend(path, "demo", {"cpu": "demo-torch==2.13.0\n", "cuda13": "demo-torch==2.13.0\n"}, "grpcio-tools\n")
    # One resolve per run: pex's download cache could race (seen with 2.1.137) when two lock processes fetch the
    # same hash-less find-links wheel at once (README); this test is about indexes.
    for resolve in ("demo-cuda13", "demo-cpu"):
        opts = [*options, *resolve_options("demo", ["cpu", "cuda13"])]
        result = run_pants(path, *opts, "generate-lockfiles", f"--resolve={resolve}")
        assert result.returncode == 0, result.stdout[-4000:]
    # Same requirement string, different indexes: each resolve locks its own accelerator's wheel.
    assert locked_versions(path / "lockfiles/demo-cuda13.lock")["demo-torch"] == "2.13.0"
    assert locked_versions(path / "lockfiles/demo-cpu.lock")["demo-torch"] == "2.13.0+cpu"
    cpu_lock = (path / "lockfiles/demo-cpu.lock").read_text()
    assert "file://${WHEELHOUSE}/cpu/demo_torch-2.13.0+cpu-py3-none-any.whl" in unquote(cpu_lock)  # pex 2.1.137 wrote %2B
    assert str(path / ".wheelhouse") not in cpu_lock  # the wheelhouse path is mapped, not written


def test_cpu_resolve_cannot_fall_back_to_the_cuda_wheel(repo) -> None:
    path, options = repo
    declare_backend(path, "nocpu", {"cpu": "demo-torch==2.13.0+cpu\n"}, "grpcio-tools\n")
    (path / ".wheelhouse/cpu/demo_torch-2.13.0+cpu-py3-none-any.whl").rename(path / "moved.whl")
    try:
        result = run_pants(path, *options, *resolve_options("nocpu", ["cpu"]), "generate-lockfiles", "--resolve=nocpu-cpu")
    finally:
        (path / "moved.whl").rename(path / ".wheelhouse/cpu/demo_torch-2.13.0+cpu-py3-none-any.whl")
    assert result.returncode != 0
    assert "demo-torch==2.13.0+cpu" in result.stdout
    assert not (path / "lockfiles/nocpu-cpu.lock").exists()


def test_audit_catches_nvidia_packages_in_a_cpu_lockfile(repo) -> None:
    path, options = repo
    declare_backend(path, "leaky", {"cpu": "demo-torch==2.13.0\n"}, "grpcio-tools\n")
    write_wheel(path / ".pypi", "nvidia-cublas", "13.0.0")
    (path / "backends/leaky/requirements-cpu.txt").write_text("demo-torch==2.13.0\nnvidia-cublas==13.0.0\n")
    opts = [*options, *resolve_options("leaky", ["cpu"])]
    assert run_pants(path, *opts, "generate-lockfiles", "--resolve=leaky-cpu").returncode == 0
    result = run_pants(path, *opts, "lint", "backends/leaky:cpu")
    assert result.returncode != 0
    assert "backends/leaky:cpu: lockfiles/leaky-cpu.lock locks 'nvidia-cublas'" in result.stdout
