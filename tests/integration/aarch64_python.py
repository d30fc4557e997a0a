"""An aarch64 CPython 3.11 on x86_64, run under qemu-user, for tests of linux/arm64 artifacts.

Assembled from Debian bookworm's arm64 packages: `debootstrap --foreign --arch=arm64
--variant=minbase --include=python3` downloads them (and unpacks the required ones), every
downloaded .deb is then unpacked with `dpkg-deb -x` into the same root, which becomes the
sysroot that `qemu-aarch64-static -L <root>` resolves the dynamic loader and libraries from.
binfmt_misc is not mounted in these containers, so qemu is called explicitly. Cached (built once
per machine) under ~/.cache/localai-build/ ($LOCALAI_BUILD_CACHE); the tools come from
tests/tools/install-debian-tools.sh. Emulated timings are emulation's, never arm64's.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, dist_path, pex_distributions, pex_path
from tests.integration.registry import debian_tool

SUITE = "bookworm"
MIRROR = os.environ.get("LOCALAI_DEBIAN_MIRROR", "http://deb.debian.org/debian")
CACHE = Path(os.environ.get("LOCALAI_BUILD_CACHE", "~/.cache/localai-build")).expanduser()
ROOT = CACHE / f"aarch64-cpython-3.11-debian-{SUITE}"
PYTHON = "usr/bin/python3.11"
ARM_LEVELS = ("arm64-i8mm", "arm64-sve", "arm64-dotprod", "arm64-neon")  # backends/common/cpu_levels.json, best first
EM_AARCH64 = 183


class Aarch64PythonError(RuntimeError):
    pass


def _debootstrap() -> str:
    found = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if os.access("/usr/sbin/debootstrap", os.X_OK) else None)
    if found:
        return found
    debian_tool("qemu-aarch64-static")  # installs both
    if not os.access("/usr/sbin/debootstrap", os.X_OK):
        raise Aarch64PythonError("tests/tools/install-debian-tools.sh did not install debootstrap")
    return "/usr/sbin/debootstrap"


def sysroot() -> Path:
    """The cached aarch64 root holding usr/bin/python3.11 (assembled on first use)."""
    if (ROOT / PYTHON).is_file():
        return ROOT
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="aarch64-root-", dir=CACHE))
    root = work / "root"
    cmd = [_debootstrap(), "--foreign", "--arch=arm64", "--variant=minbase", "--include=python3", SUITE, str(root), MIRROR]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    debs = sorted((root / "var/cache/apt/archives").glob("*.deb"))
    if result.returncode != 0 or not debs:
        shutil.rmtree(work, ignore_errors=True)
        raise Aarch64PythonError(f"`{' '.join(cmd)}` failed (needs root and a reachable Debian mirror, "
                                 f"LOCALAI_DEBIAN_MIRROR):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, capture_output=True)
        deb.unlink()
    if not (root / PYTHON).is_file():
        shutil.rmtree(work, ignore_errors=True)
        raise Aarch64PythonError(f"the arm64 packages of {SUITE} gave no {PYTHON}")
    try:
        root.rename(ROOT)  # atomic: a concurrent test either sees nothing or the whole root
    except OSError:
        if not (ROOT / PYTHON).is_file():
            raise
    shutil.rmtree(work, ignore_errors=True)
    return ROOT


def qemu() -> str:
    return debian_tool("qemu-aarch64-static")


def python_argv() -> list[str]:
    """argv prefix running the aarch64 python3.11 under qemu (append the script and its arguments)."""
    root = sysroot()
    return [qemu(), "-L", str(root), str(root / PYTHON)]


def python_on_path(directory: Path) -> Path:
    """Writes ``directory``/python3.11, the aarch64 interpreter under qemu, and returns
    ``directory`` to put first on PATH: a cross-built PEX's shebang (`/usr/bin/env python3.11`)
    then finds it. qemu's -0 keeps argv[0], so sys.executable is this wrapper and pex's venv
    re-exec goes through qemu again."""
    root = sysroot()
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / "python3.11"
    wrapper.write_text(f'#!/bin/sh\nexec "{qemu()}" -0 "$0" -L "{root}" "{root / PYTHON}" "$@"\n')
    wrapper.chmod(0o755)
    return directory


def emulated_env(qemu_bin: Path) -> dict[str, str]:
    """The environment in which a `cpu-arm64` folder's run.sh finds the aarch64 python3.11."""
    return {"PATH": f"{python_on_path(qemu_bin)}:{os.environ['PATH']}"}


@contextlib.contextmanager
def served_beside_x86_64(
    backend: str, qemu_bin: Path, timeout: float, load: backend_pb2.ModelOptions | None = None
) -> Iterator[tuple[BackendProcess, BackendProcess]]:
    """(arm64, x86_64): the backend's `cpu-arm64` folder served by the aarch64 interpreter under
    qemu and its `cpu` folder served natively, both healthy (and, with `load`, both having loaded
    that model); stopped on exit."""
    arm = BackendProcess(backend, "cpu-arm64", env=emulated_env(qemu_bin))
    x86 = BackendProcess(backend, "cpu")
    try:
        x86.wait_healthy()
        arm.wait_healthy(timeout=timeout)
        for server in (arm, x86) if load is not None else ():
            res = server.stub.LoadModel(load, timeout=timeout)
            assert res.success, res.message + server.output()
        yield arm, x86
    finally:
        arm.stop()
        x86.stop()


def aarch64_engine_builds(backend: str, engine: str, library: str) -> dict[str, Path]:
    """{CPU level: its folder} of the engine builds `backend:cpu-arm64`'s packed PEX carries,
    checked to be what an arm64 folder may hold: a build record for linux_aarch64, no x86_64
    wheel, only ARM levels (those [localai-native].cpu_levels keeps: all four unless a run restricts them) and
    every `library` an aarch64 ELF."""
    record = json.loads(dist_path(backend, "cpu-arm64", "build-record.json").read_text())
    assert (record["platform"], record["resolve"]) == ("linux_aarch64", f"{backend}-cpu-arm64")
    pex = pex_path(backend, "cpu-arm64")
    assert all("x86_64" not in d for d in pex_distributions(pex)), pex_distributions(pex)
    builds = {lib.parent.name: lib.parent for lib in pex.glob(f"localai_backend/engines/{engine}/*/{library}")}
    assert builds and set(builds) <= set(ARM_LEVELS), builds
    for level, folder in builds.items():
        assert int.from_bytes((folder / library).read_bytes()[18:20], "little") == EM_AARCH64, level
    return builds
