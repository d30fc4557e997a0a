"""./pants on a machine without CPython 3.9 stops with a message saying what to install."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def test_missing_python39_names_what_to_install(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "3rdparty").mkdir(parents=True)
    shutil.copy2("pants", repo / "pants")
    shutil.copytree("3rdparty/bootstrap", repo / "3rdparty/bootstrap")
    shutil.copytree("3rdparty/pants", repo / "3rdparty/pants")
    shutil.copy2("3rdparty/wheelhouse.toml", repo / "3rdparty/wheelhouse.toml")
    bin_dir = tmp_path / "bin"  # only what the script needs, and no python3.9
    bin_dir.mkdir()
    for tool in ("bash", "cat", "sha256sum", "cut", "dirname"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path / "home"), "PYENV_ROOT": str(tmp_path / "no-pyenv")}
    result = subprocess.run(["./pants", "--version"], cwd=repo, env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "CPython 3.9 not found" in result.stderr
    assert "pyenv install 3.9" in result.stderr and "PANTS_BOOTSTRAP_PYTHON" in result.stderr
    assert not (tmp_path / "home/.cache/localai-build").exists() or not any(
        (tmp_path / "home/.cache/localai-build").glob("pants-venv-*/.ready")
    )


def test_a_second_first_run_waits_for_the_first_and_reuses_its_venv(tmp_path: Path) -> None:
    """Two ./pants started at once on a fresh machine: the second bootstrap waits on the lock the
    first holds, then finds the venv ready and installs nothing (it used to delete the first's)."""
    import fcntl
    import sys
    import time

    cache, venv = tmp_path / "cache", tmp_path / "cache/pants-venv-0123456789abcdef"
    cache.mkdir()
    cmd = [sys.executable, "3rdparty/bootstrap/bootstrap.py", "--root", ".", "--cache", str(cache), "--venv", str(venv)]
    with open(cache / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first run, installing
        second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(2)
        assert second.poll() is None, second.communicate()[0]  # waiting, not installing
        venv.mkdir()
        (venv / ".ready").write_text("ok\n")
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 0, out
    assert "creating the Pants venv" not in out and (venv / ".ready").read_text() == "ok\n"
