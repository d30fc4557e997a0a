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
