"""Supply chain: every locked artifact is pinned by sha256, lockfiles carry no machine path,
and the bootstrap refuses a wheelhouse file whose hash does not match its manifest."""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

LOCKFILES = sorted(Path("lockfiles").glob("*.lock"))


def load_lock(path: Path) -> dict:
    return json.loads("\n".join(l for l in path.read_text().splitlines() if not l.startswith("//")))


def test_there_are_lockfiles_to_check() -> None:
    assert len(LOCKFILES) >= 10


@pytest.mark.parametrize("lockfile", LOCKFILES, ids=lambda p: p.name)
def test_every_artifact_has_a_sha256(lockfile: Path) -> None:
    missing = [
        art["url"]
        for resolve in load_lock(lockfile)["locked_resolves"]
        for req in resolve["locked_requirements"]
        for art in req["artifacts"]
        if art.get("algorithm") != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", art.get("hash", ""))
    ]
    assert missing == []


@pytest.mark.parametrize("lockfile", LOCKFILES, ids=lambda p: p.name)
def test_no_machine_path(lockfile: Path) -> None:
    text = lockfile.read_text()
    assert not re.search(r"file:///|/root/|/home/|/tmp/|\.pyenv/versions", text)


def bootstrap_module():
    spec = importlib.util.spec_from_file_location("bootstrap", "3rdparty/bootstrap/bootstrap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tampered_wheelhouse_file_is_refused_naming_the_file(tmp_path, monkeypatch, capsys) -> None:
    bootstrap = bootstrap_module()
    root = tmp_path / "repo"
    (root / "3rdparty").mkdir(parents=True)
    good = b"the real wheel"
    (root / "3rdparty/wheelhouse.toml").write_text(
        "[demo]\n"
        'accelerator = "cpu"\n'
        'file = "demo-1.0-py3-none-any.whl"\n'
        f'sha256 = "{__import__("hashlib").sha256(good).hexdigest()}"\n'
        'url = "http://127.0.0.1:9/demo-1.0-py3-none-any.whl"\n'
        'requirement = "demo==1.0"\n'
    )
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "demo-1.0-py3-none-any.whl").write_bytes(b"a tampered wheel")
    monkeypatch.setenv("LOCALAI_WHEELHOUSE_DIRS", str(mirror))
    cache = tmp_path / "cache"
    with pytest.raises(SystemExit):
        bootstrap.fill_wheelhouse(sys.executable, root, cache)
    err = capsys.readouterr().err
    assert "hash mismatch for demo-1.0-py3-none-any.whl" in err
    assert "3rdparty/wheelhouse.toml" in err and "[demo]" in err
    # Nothing half-written: neither the file nor its partial download stays in the wheelhouse.
    assert list((cache / "wheelhouse/cpu").iterdir()) == []

    (mirror / "demo-1.0-py3-none-any.whl").write_bytes(good)
    bootstrap.fill_wheelhouse(sys.executable, root, cache)
    assert (cache / "wheelhouse/cpu/demo-1.0-py3-none-any.whl").read_bytes() == good


def bootstrap_python() -> str:
    """The CPython 3.9 ./pants runs the bootstrap with (found as ./pants finds it), with pip."""
    import glob
    import os
    import subprocess

    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for py in filter(None, [os.environ.get("PANTS_BOOTSTRAP_PYTHON"), *sorted(glob.glob(f"{pyenv}/versions/3.9*/bin/python3.9"))]):
        if subprocess.run([py, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            return py
    raise AssertionError("no CPython 3.9 with pip, which ./pants needs: set PANTS_BOOTSTRAP_PYTHON")


def test_a_wheel_built_from_its_pinned_sdist_is_the_same_bytes_twice_and_a_tampered_sdist_is_refused(
    tmp_path, monkeypatch, capsys
) -> None:
    """What [sox-1.5.0] of 3rdparty/wheelhouse.toml does, on an sdist made here (file:// URL): the
    build tools pinned, PEP 517 isolation, so the wheel's sha256 can be pinned in the manifest."""
    import hashlib
    import io
    import tarfile
    import zipfile

    bootstrap, py = bootstrap_module(), bootstrap_python()
    monkeypatch.delenv("LOCALAI_WHEELHOUSE_DIRS", raising=False)
    sdist = tmp_path / "demo_built-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in {
            "setup.py": "from setuptools import setup\nsetup(name='demo_built', version='1.0', py_modules=['demo_built'])\n",
            "demo_built.py": "ANSWER = 42\n",
        }.items():
            info = tarfile.TarInfo(f"demo_built-1.0/{name}")
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text.encode()))
    root = tmp_path / "repo"
    (root / "3rdparty").mkdir(parents=True)

    def manifest(wheel_sha: str, sdist_sha: str) -> None:
        (root / "3rdparty/wheelhouse.toml").write_text(
            "[demo]\n"
            'accelerator = "cpu"\n'
            'file = "demo_built-1.0-py3-none-any.whl"\n'
            f'sha256 = "{wheel_sha}"\n'
            f'url = "file://{sdist}"\n'
            f'sdist_sha256 = "{sdist_sha}"\n'
            'build_constraints = "setuptools==80.9.0 wheel==0.45.1"\n'
        )

    sdist_sha = hashlib.sha256(sdist.read_bytes()).hexdigest()
    # Not yet pinned: the build runs, its sha256 is named, and nothing stays in the wheelhouse.
    manifest("0" * 64, sdist_sha)
    with pytest.raises(SystemExit):
        bootstrap.fill_wheelhouse(py, root, tmp_path / "cache1")
    err = capsys.readouterr().err
    built_sha = re.search(r"hash mismatch for demo_built-1.0-py3-none-any.whl .* got ([0-9a-f]{64})", err).group(1)
    assert list((tmp_path / "cache1/wheelhouse/cpu").iterdir()) == []
    # Pinned, a second build on an empty cache gives exactly those bytes.
    manifest(built_sha, sdist_sha)
    bootstrap.fill_wheelhouse(py, root, tmp_path / "cache2")
    wheel = tmp_path / "cache2/wheelhouse/cpu/demo_built-1.0-py3-none-any.whl"
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == built_sha
    with zipfile.ZipFile(wheel) as whl:
        assert whl.read("demo_built.py") == b"ANSWER = 42\n"
        assert {i.date_time[:3] for i in whl.infolist()} == {(1980, 1, 1)}
    # An sdist that is not the pinned one is refused before anything is built.
    manifest(built_sha, "f" * 64)
    with pytest.raises(SystemExit):
        bootstrap.fill_wheelhouse(py, root, tmp_path / "cache3")
    assert "hash mismatch for demo_built-1.0.tar.gz (3rdparty/wheelhouse.toml, the sdist of demo_built-1.0-py3-none-any.whl)" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "cache3/wheelhouse/cpu/demo_built-1.0-py3-none-any.whl").exists()
