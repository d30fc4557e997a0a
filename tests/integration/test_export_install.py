"""The pip/uv export of backends/kitten-tts:cpu, installed without Pants into a fresh venv.

`pants package` builds the export (runtime_package_dependencies); the test fills a wheel folder
with `pip download` of exactly the exported pins (pip checks every hash; it uses pip's cache, and
the network only for wheels not cached yet), then installs offline: `--no-index --find-links`,
`--require-hashes`, into a new venv, and imports the backend's main dependency (kittentts).
uv is the project's pinned one (the `uv` resolve, lockfiles/uv.lock, that `./pants localai-prelock`
runs), packaged by Pants as tools/uv.pex (tests/integration:uv), so CI runs the uv install too.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXPORT = Path("export/kitten-tts-cpu")
UV = Path("tools/uv.pex")  # tests/integration:uv, a runtime package of this test


def run(*cmd, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_CONFIG_FILE": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    tool = tmp_path_factory.mktemp("tool")
    assert run(sys.executable, "-m", "venv", tool).returncode == 0
    res = run(tool / "bin/pip", "download", "--require-hashes", "--no-deps", "-d", folder, "-r", EXPORT / "requirements.txt")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return folder


def test_export_files_are_packaged() -> None:
    text = (EXPORT / "requirements.txt").read_text()
    assert "kittentts==0.1.3 \\\n    --hash=sha256:" in text
    assert "python=3.11" in (EXPORT / "environment.yml").read_text()


def test_pip_installs_the_export_offline_with_hashes_and_the_backend_dependency_imports(tmp_path, wheels) -> None:
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", venv).returncode == 0
    res = run(
        venv / "bin/pip", "install", "--no-index", "--find-links", wheels, "--require-hashes", "-r", EXPORT / "requirements.txt"
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    res = run(venv / "bin/python", "-c", "import kittentts, grpc, onnxruntime; print(kittentts.__name__)")
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip() == "kittentts"


def test_a_tampered_hash_is_refused(tmp_path, wheels) -> None:
    text = (EXPORT / "requirements.txt").read_text()
    start = text.index("kittentts==0.1.3")
    line_end = text.index("--hash=sha256:", start) + len("--hash=sha256:")
    bad = tmp_path / "requirements.txt"
    bad.write_text(text[:line_end] + "0" * 64 + text[line_end + 64 :])
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", venv).returncode == 0
    res = run(venv / "bin/pip", "install", "--no-index", "--find-links", wheels, "--require-hashes", "-r", bad)
    assert res.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in res.stderr


def uv(tmp_path: Path, *args) -> subprocess.CompletedProcess:
    """The pinned uv, from its PEX: its own PEX_ROOT and cache, no host uv configuration."""
    env = {"PEX_ROOT": str(tmp_path / "pex_root"), "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_NO_CONFIG": "1"}
    return subprocess.run(
        [sys.executable, str(UV), *map(str, args)], env={**os.environ, **env}, capture_output=True, text=True
    )


def test_the_uv_is_the_pinned_one(tmp_path) -> None:
    pinned = re.search(r"uv==([0-9.]+)", Path("3rdparty/uv/BUILD").read_text()).group(1)
    res = uv(tmp_path, "--version")
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split()[:2] == ["uv", pinned], res.stdout


def test_uv_installs_the_export_offline(tmp_path, wheels) -> None:
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", venv).returncode == 0
    res = uv(
        tmp_path, "pip", "install", "--python", venv / "bin/python", "--no-index", "--find-links", wheels,
        "--require-hashes", "-r", EXPORT / "requirements.txt",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert run(venv / "bin/python", "-c", "import kittentts").returncode == 0
