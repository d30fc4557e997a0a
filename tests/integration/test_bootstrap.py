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
