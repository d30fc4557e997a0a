"""A stand-in for python-build-standalone's `install_only` archive, assembled from Debian's
CPython 3.11 packages, for tests on machines that cannot reach GitHub (where the pinned
archive, //3rdparty/portable-python, lives).

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


def _tar(root: Path, archive: Path) -> None:
    paths = sorted(p for p in root.rglob("*"))
    with archive.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
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
