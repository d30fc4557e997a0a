"""The bootstrap ./pants runs: what it says without CPython 3.9, its lock, its venv naming, and
the pex tool it builds."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.integration.portable_python_standin import machine_cpython
from tests.integration.temp_repo import write_wheel


def test_missing_python39_names_what_to_install(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "3rdparty").mkdir(parents=True)
    shutil.copy2("pants", repo / "pants")
    shutil.copytree("3rdparty/bootstrap", repo / "3rdparty/bootstrap")
    shutil.copytree("3rdparty/pants", repo / "3rdparty/pants")
    shutil.copy2("3rdparty/wheelhouse.toml", repo / "3rdparty/wheelhouse.toml")
    bin_dir = tmp_path / "bin"  # only what the script needs: no python3.9, and no curl or wget to fetch the pinned one
    bin_dir.mkdir()
    for tool in ("bash", "cat", "sha256sum", "cut", "dirname", "uname", "mkdir", "mktemp", "rm"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path / "home"), "PYENV_ROOT": str(tmp_path / "no-pyenv")}
    result = subprocess.run(["./pants", "--version"], cwd=repo, env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "no CPython 3.9 on this machine: fetching the one" in result.stderr
    assert "neither curl nor wget is on PATH" in result.stderr
    assert "CPython 3.9 not found" in result.stderr
    assert "pyenv install 3.9" in result.stderr and "PANTS_BOOTSTRAP_PYTHON" in result.stderr
    assert not (tmp_path / "home/.cache/localai-build").exists() or not any(
        (tmp_path / "home/.cache/localai-build").glob("pants-venv-*/.ready-*")
    )


def test_a_second_first_run_waits_for_the_first_and_reuses_its_venv(tmp_path: Path) -> None:
    """Two ./pants started at once on a fresh machine: the second bootstrap waits on the lock the
    first holds, then finds the venv ready and installs nothing (it used to delete the first's)."""
    import fcntl
    import time

    cache, venv = tmp_path / "cache", tmp_path / "cache/pants-venv-0123456789abcdef"
    ready = venv / ".ready-fedcba9876543210"
    cache.mkdir()
    cmd = [sys.executable, "3rdparty/bootstrap/bootstrap.py", "--root", ".", "--cache", str(cache), "--venv", str(venv),
           "--ready", str(ready)]
    with open(cache / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first run, installing
        second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(2)
        assert second.poll() is None, second.communicate()[0]  # waiting, not installing
        venv.mkdir()
        ready.write_text("ok\n")
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 0, out
    assert "creating the Pants venv" not in out and ready.read_text() == "ok\n"


def test_a_bootstrap_edit_keeps_the_venv_and_its_path(tmp_path: Path) -> None:
    """Pants runs the pex tool with its venv's python, so that path is in every pex process's
    cache key: ./pants names the venv by requirements.txt alone, and a changed bootstrap.py or
    wheelhouse.toml re-runs only the checks, in the same venv."""

    def venv_and_ready(repo: Path) -> tuple[str, str]:
        # The paths ./pants hands to the bootstrap, read from a stand-in python3.9 that records them.
        fake = tmp_path / "python3.9"
        fake.write_text('#!/bin/bash\n[ "$1" = -c ] && exit 0\necho "$@" > "$ARGS_FILE"\nexit 3\n')
        fake.chmod(0o755)
        env = {**os.environ, "HOME": str(tmp_path / "home"), "PANTS_BOOTSTRAP_PYTHON": str(fake),
               "ARGS_FILE": str(tmp_path / "args")}
        assert subprocess.run(["./pants", "--version"], cwd=repo, env=env).returncode == 3
        args = (tmp_path / "args").read_text().split()
        return args[args.index("--venv") + 1], args[args.index("--ready") + 1]

    repo = tmp_path / "repo"
    (repo / "3rdparty/bootstrap").mkdir(parents=True)
    (repo / "3rdparty/pants").mkdir()
    shutil.copy2("pants", repo / "pants")
    shutil.copy2("3rdparty/bootstrap/bootstrap.py", repo / "3rdparty/bootstrap/bootstrap.py")
    shutil.copy2("3rdparty/pants/requirements.txt", repo / "3rdparty/pants/requirements.txt")
    pex_tool = b"a stand-in pex tool\n"  # build_pex_tool keeps a file whose sha256 matches
    (repo / "3rdparty/wheelhouse.toml").write_text(
        f'[pex-tool]\nfile = "pex-tool"\nsha256 = "{hashlib.sha256(pex_tool).hexdigest()}"\nrequirement = "pex"\n')
    venv_before, ready_before = venv_and_ready(repo)
    with (repo / "3rdparty/bootstrap/bootstrap.py").open("a") as f:
        f.write("# an edit\n")
    venv, ready = venv_and_ready(repo)
    assert venv == venv_before and ready != ready_before, (venv_before, venv, ready_before, ready)

    cache = tmp_path / "home/.cache/localai-build"
    Path(venv).mkdir(parents=True)
    (Path(venv) / ".installed").write_text("ok\n")  # the venv the first bootstrap made
    (cache / "pex-tool").write_bytes(pex_tool)
    result = subprocess.run([sys.executable, "3rdparty/bootstrap/bootstrap.py", "--root", str(repo), "--cache", str(cache),
                             "--venv", venv, "--ready", ready], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "creating the Pants venv" not in result.stderr and Path(ready).is_file(), result.stderr


def test_the_pex_tool_caches_under_the_pex_root_pants_gives_it(tmp_path: Path) -> None:
    """Pants runs every pex process with PEX_ROOT in its named cache; a tool built with pex's
    default --strip-pex-env drops it and caches in ~/.pex, shared by every run on the machine."""
    tool = Path(os.environ["HOME"]) / ".cache/localai-build/pex-2.105.2"  # built by this run's ./pants
    wheels = write_wheel(tmp_path / "wheels", "tiny", "1.0").parent
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "PEX_ROOT": str(tmp_path / "pex-root"),
           "PEX_SCRIPT": "pex3"}
    result = subprocess.run(
        [sys.executable, str(tool), "lock", "create", "--no-pypi", "--find-links", wheels.as_uri(), "tiny==1.0",
         "--pip-version", "20.3.4-patched", "-o", str(tmp_path / "lock.json")],
        env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert list((tmp_path / "pex-root").rglob("tiny-1.0-py3-none-any.whl")), "pex cached nothing under the PEX_ROOT it was given"
    assert not (tmp_path / "home/.pex").exists()


def test_interpreter_discovery_searches_only_the_declared_interpreters(tmp_path: Path) -> None:
    """./pants sets [python-bootstrap].search_path to the folders of the CPython 3.9 and 3.11 it
    finds (where the interpreter runs from, not a pyenv shim's folder), so a cold build probes two interpreters, not
    every one of pyenv and PATH; a search path the user sets wins; with 3.11 missing and none pinned
    it leaves pants.toml's, for Pants' own error. The Pants venv here is a stand-in that prints what Pants
    would read."""
    repo, home = tmp_path / "repo", tmp_path / "home"
    for path in ("pants", "3rdparty/pants/requirements.txt", "3rdparty/bootstrap/bootstrap.py", "3rdparty/wheelhouse.toml"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, repo / path)
    requirements = (repo / "3rdparty/pants/requirements.txt").read_bytes()
    stamp = requirements + (repo / "3rdparty/bootstrap/bootstrap.py").read_bytes() + (repo / "3rdparty/wheelhouse.toml").read_bytes()
    venv = home / ".cache/localai-build" / f"pants-venv-{hashlib.sha256(requirements).hexdigest()[:16]}"
    (venv / "bin").mkdir(parents=True)
    (venv / f".ready-{hashlib.sha256(stamp).hexdigest()[:16]}").write_text("ok\n")
    (venv / "bin/python").write_text('#!/bin/sh\necho "search_path=${PANTS_PYTHON_BOOTSTRAP_SEARCH_PATH:-unset}"\n')
    (venv / "bin/python").chmod(0o755)
    py39, py311 = machine_cpython("3.9"), machine_cpython("3.11")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "cat", "sha256sum", "cut", "dirname", "uname"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    os.symlink(py39, bin_dir / "python3.9")
    # No pins: a missing interpreter cannot be fetched (test_bootstrap_interpreters.py fetches).
    (tmp_path / "no-pins.txt").write_text("")
    env = {"PATH": str(bin_dir), "HOME": str(home), "PYENV_ROOT": str(tmp_path / "no-pyenv"),
           "LOCALAI_BUILD_INTERPRETERS": str(tmp_path / "no-pins.txt")}

    def search_path(**extra: str) -> str:
        out = subprocess.run(["./pants", "--version"], cwd=repo, env={**env, **extra}, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert search_path() == "search_path=unset"  # no 3.11: pants.toml's search path, Pants' error
    # 3.11 behind a shim, as pyenv's: the folder of the interpreter it runs, not the shim's.
    (bin_dir / "python3.11").write_text(f'#!/bin/sh\nexec {py311} "$@"\n')
    (bin_dir / "python3.11").chmod(0o755)
    assert search_path() == f"search_path=['{bin_dir}', '{os.path.dirname(py311)}']"
    assert search_path(PANTS_PYTHON_BOOTSTRAP_SEARCH_PATH="['<PATH>']") == "search_path=['<PATH>']"
