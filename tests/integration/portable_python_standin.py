"""Stand-ins for python-build-standalone's `install_only` archives, for tests on machines that
cannot reach GitHub (where the pinned archives, //3rdparty/portable-python and
3rdparty/bootstrap/interpreters.txt, live): one assembled from Debian's CPython 3.11 packages,
and one relocated from a CPython this machine has (pyenv's, for the bootstrap's 3.9 and 3.11).

Debian's python3.11 finds its prefix from its own path (lib/python3.11/os.py next to ../bin), so
the packages' usr/bin/python3.11 and usr/lib/python3.11/ moved under python/ give the same
layout as the real archive: python/bin/python3.11, python/lib/python3.11/... It is a stand-in,
not a replacement: unlike python-build-standalone it links the host's libssl, libffi, libz ...
and needs glibc >= 2.36. The packages come from the machine's apt sources (`apt-get download`,
no install); the tarball is written deterministically (sorted, mtime 0, uid/gid 0).
"""
from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

PACKAGES = ("python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib")
ARCHIVE_NAME = "debian-cpython-3.11-x86_64-linux-gnu-install_only.tar.gz"


class StandInError(RuntimeError):
    pass


def _apt_download(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = ["apt-get", "download", *PACKAGES]
    result = subprocess.run(cmd, cwd=dest, capture_output=True, text=True)
    if result.returncode != 0:  # no package lists yet on a fresh machine
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run([*sudo, "apt-get", "update", "-q"], capture_output=True, text=True)
        result = subprocess.run(cmd, cwd=dest, capture_output=True, text=True)
    if result.returncode != 0 or len(list(dest.glob("*.deb"))) != len(PACKAGES):
        raise StandInError(f"`{' '.join(cmd)}` failed (needs a Debian apt source):\n{result.stdout}\n{result.stderr}")


def _materialise_links(root: Path) -> None:
    """Relative links inside the tree become copies; links leaving it (Debian's sitecustomize.py
    -> /etc/python3.11/) are dropped. Never written through: the link itself is replaced."""
    for link in sorted(p for p in root.rglob("*") if p.is_symlink()):
        target = os.readlink(link)
        resolved = (link.parent / target).resolve()
        link.unlink()
        if not os.path.isabs(target) and resolved.is_file() and root.resolve() in resolved.parents:
            shutil.copyfile(resolved, link)


def _tar(root: Path, archive: Path, level: int = 9) -> None:
    paths = sorted(p for p in root.rglob("*"))
    with archive.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=level) as gz:
        with tarfile.open(fileobj=gz, mode="w|", format=tarfile.GNU_FORMAT) as tar:
            for p in paths:
                info = tar.gettarinfo(str(p), arcname=p.relative_to(root.parent).as_posix())
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                info.mode = 0o755 if p.is_dir() or p.stat().st_mode & 0o111 else 0o644
                if p.is_dir():
                    tar.addfile(info)
                else:
                    with p.open("rb") as f:
                        tar.addfile(info, f)


def debian_cpython_archive(workdir: Path) -> Path:
    """Writes <workdir>/<ARCHIVE_NAME>: python/bin/python3.11, python/lib/python3.11/..."""
    debs, unpacked, root = workdir / "debs", workdir / "unpacked", workdir / "stand-in/python"
    _apt_download(debs)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True, capture_output=True)
    (root / "bin").mkdir(parents=True)
    shutil.copy2(unpacked / "usr/bin/python3.11", root / "bin/python3.11")
    shutil.copytree(unpacked / "usr/lib/python3.11", root / "lib/python3.11", symlinks=True)
    _materialise_links(root)
    archive = workdir / ARCHIVE_NAME
    _tar(root, archive)
    return archive


def machine_cpython(version: str) -> str:
    """The real executable of a CPython `version` this machine has (the build needs 3.9 and 3.11)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for name in (*sorted(pyenv.glob(f"versions/{version}.*/bin/python{version}")), f"python{version}"):
        exe = shutil.which(str(name))
        out = subprocess.run([exe, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True) if exe else None
        if out and out.returncode == 0:  # a pyenv shim without pyenv's environment fails
            return out.stdout.strip()
    raise AssertionError(f"no CPython {version} here: the build itself needs it")


# Parts of a CPython installation nothing the build runs imports: left out of the relocated copy.
_UNUSED = ("test", "site-packages", "idlelib", "tkinter", "turtledemo", "__pycache__", "*.a")


def relocated_cpython_archive(executable: str, workdir: Path) -> Path:
    """Writes <workdir>/cpython-X.Y-relocated-install_only.tar.gz from the CPython `executable`
    runs (a pyenv build: bin/pythonX.Y, lib/libpythonX.Y.so, lib/pythonX.Y/) in the install_only
    layout. pyenv links the interpreter with its own absolute lib/ as RUNPATH; that string is
    rewritten in place to `$ORIGIN/../lib`, as python-build-standalone's is, so the copy loads its
    own libpython and nothing of the original folder."""
    prefix, version = subprocess.run(
        [executable, "-c", "import sys; print(sys.base_prefix); print('%d.%d' % sys.version_info[:2])"],
        check=True, capture_output=True, text=True).stdout.split()
    root = workdir / f"relocated-{version}/python"
    (root / "bin").mkdir(parents=True)
    exe = (Path(prefix) / f"bin/python{version}").read_bytes()
    old, new = f"{prefix}/lib".encode() + b"\0", b"$ORIGIN/../lib\0"
    if old in exe:  # a shared-library build; a static one has no RUNPATH to move
        exe = exe.replace(old, new + b"\0" * (len(old) - len(new)))
    (root / f"bin/python{version}").write_bytes(exe)
    (root / f"bin/python{version}").chmod(0o755)
    (root / "bin/python3").symlink_to(f"python{version}")  # as in the real archive (Pants runs bin/python3)
    (root / "lib").mkdir()
    for lib in sorted((Path(prefix) / "lib").glob(f"libpython{version}*.so*")):
        shutil.copy2(lib, root / "lib" / lib.name)
    shutil.copytree(Path(prefix) / f"lib/python{version}", root / f"lib/python{version}",
                    ignore=shutil.ignore_patterns(*_UNUSED))
    archive = workdir / f"cpython-{version}-relocated-install_only.tar.gz"
    _tar(root, archive, level=1)
    return archive
