"""./pants on a machine with no CPython visible to it: PATH holds only the few tools the script
runs, HOME is empty, pyenv is absent. It fetches the CPython 3.9 and 3.11 its pins file names,
checks each sha256, unpacks them under ~/.cache/localai-build/python/, runs Pants on that 3.9 and
locks a resolve with that 3.11.

GitHub, where python-build-standalone's archives live, is unreachable here, so the pins file
given with LOCALAI_BUILD_INTERPRETERS names stand-ins: this machine's own 3.9 and 3.11, relocated
into the install_only layout (portable_python_standin.py), as file:// URLs with their sha256. The
code path is the one the real pins take; only the source differs.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.integration.portable_python_standin import machine_cpython, relocated_cpython_archive
from tests.integration.temp_repo import declare_backend, local_index_options, make_temp_repo, resolve_options, run_pants, write_wheel

# What ./pants and its bootstrap run besides Python: coreutils, tar and gzip. No curl: a file:// pin is copied.
TOOLS = ("bash", "cat", "sha256sum", "cut", "dirname", "uname", "mkdir", "mktemp", "cp", "rm", "mv", "tar", "gzip")


def _pins(path: Path, rows: dict[str, tuple[str, Path]]) -> Path:
    machine = os.uname().machine
    path.write_text("# version machine sha256 url\n" + "".join(
        f"{version} {machine} {sha} {archive.as_uri()}\n" for version, (sha, archive) in rows.items()))
    return path


def test_interpreters_pins_the_portable_python_archive() -> None:
    """The backends' 3.11 that ./pants fetches is the CPython a backend folder can carry: one archive."""
    rows = [l.split() for l in Path("3rdparty/bootstrap/interpreters.txt").read_text().splitlines() if l and l[0] != "#"]
    pins = {(v, m): (sha, url) for v, m, sha, url in rows}
    build = Path("3rdparty/portable-python/BUILD").read_text()
    url, sha = re.search(r'url="([^"]+)"', build).group(1), re.search(r'sha256="([0-9a-f]{64})"', build).group(1)
    assert pins[("3.11", "x86_64")] == (sha, url)
    assert {m for v, m in pins} == {"x86_64", "aarch64"} and {v for v, m in pins} == {"3.9", "3.11"}


def test_a_machine_without_cpython_fetches_the_pinned_builds(tmp_path: Path) -> None:
    archives = {v: relocated_cpython_archive(machine_cpython(v), tmp_path) for v in ("3.9", "3.11")}
    repo = make_temp_repo(tmp_path / "repo")
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    for tool in TOOLS:
        os.symlink(shutil.which(tool), bin_dir / tool)
    cache = home / ".cache/localai-build"
    cache.mkdir(parents=True)
    # The accelerator wheelhouse (torch's CPU wheel) is this machine's: the bootstrap checks each sha256.
    os.symlink(Path(os.environ["HOME"]) / ".cache/localai-build/wheelhouse", cache / "wheelhouse")
    env = {"PATH": str(bin_dir), "HOME": str(home), "PYENV_ROOT": str(tmp_path / "no-pyenv"),
           "LOCALAI_BUILD_INTERPRETERS": str(tmp_path / "interpreters.txt")}

    # A tampered archive: refused by its sha256, naming the pins file; nothing unpacked, nothing left.
    _pins(tmp_path / "interpreters.txt", {"3.9": ("0" * 64, archives["3.9"])})
    result = subprocess.run(["./pants", "--version"], cwd=repo, env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert f"pins {'0' * 64}: refused and deleted" in result.stderr and str(tmp_path / "interpreters.txt") in result.stderr
    assert "CPython 3.9 not found" in result.stderr
    assert not list((cache / "python").iterdir())

    _pins(tmp_path / "interpreters.txt", {v: (hashlib.sha256(a.read_bytes()).hexdigest(), a) for v, a in archives.items()})
    wheelhouse = repo / ".wheelhouse"
    write_wheel(wheelhouse / "cpu", "demo-torch", "2.13.0+cpu")
    write_wheel(repo / ".pypi", "grpcio-tools", "1.85.1")
    declare_backend(repo, "demo", {"cpu": "demo-torch==2.13.0\n"}, "grpcio-tools\n")
    result = run_pants(repo, *local_index_options(repo), *resolve_options("demo", ["cpu"]), "generate-lockfiles",
                       "--resolve=demo-cpu", env=env)
    assert result.returncode == 0, result.stdout[-4000:]
    for version in ("3.9", "3.11"):
        assert f"no CPython {version} on this machine: fetching the one" in result.stdout
    # Locked for the 3.11 that was fetched: no other one is visible to the run.
    assert "demo-torch" in (repo / "lockfiles/demo-cpu.lock").read_text()

    # Pants' venv runs on the fetched 3.9, which loads its own libpython and nothing of this machine's.
    (venv_python,) = cache.glob("pants-venv-*/bin/python")
    probe = subprocess.run([str(venv_python), "-c", "import sys; print(sys.base_prefix); print(open('/proc/self/maps').read())"],
                           env=env, check=True, capture_output=True, text=True).stdout
    base_prefix, maps = probe.split("\n", 1)
    assert Path(base_prefix).parent.parent == cache / "python", base_prefix
    origin = subprocess.run([machine_cpython("3.9"), "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True)
    assert origin.stdout.strip() not in maps
    # A second run finds both unpacked and fetches nothing.
    again = subprocess.run(["./pants", "--no-pantsd", "--version"], cwd=repo, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "fetching" not in again.stderr, again.stderr
