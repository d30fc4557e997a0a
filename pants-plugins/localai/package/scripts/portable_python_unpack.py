"""Unpack a python-build-standalone `install_only` archive into <out>/python/, standard library only.

    python portable_python_unpack.py <archive> <out> --python-version 3.11

Runs as a process in the Pants sandbox (portable_python.py), so its output is cached like any
build step. The archive must hold `python/bin/python<X.Y>` and `python/lib/python<X.Y>/os.py`
(the install_only layout). Regular files and directories are kept; symbolic links
(python3 -> python3.11, libpython3.11.so -> ..., man pages) are dropped, because a backend image
carries files only (oci/layout.py) and run.sh names python<X.Y> itself. Writes <out>/python.json:
the full version (from the archive name or patchlevel.h), file count, bytes, dropped links.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
from pathlib import Path, PurePosixPath

ROOT = "python"
# cpython-3.11.9+20240713-x86_64-unknown-linux-gnu-install_only.tar.gz
PBS_NAME = re.compile(r"^cpython-(\d+\.\d+\.\d+)\+(\d{8})-([a-z0-9_]+-[a-z0-9_]+-[a-z0-9_]+-[a-z0-9_]+)-install_only")


class ArchiveError(ValueError):
    pass


def _full_version(archive_name: str, root: Path, python_version: str) -> str:
    m = PBS_NAME.match(archive_name)
    if m:
        return m.group(1)
    patchlevel = root / f"include/python{python_version}/patchlevel.h"
    if patchlevel.is_file():
        m = re.search(r'#define\s+PY_VERSION\s+"([^"]+)"', patchlevel.read_text(errors="replace"))
        if m:
            return m.group(1)
    return python_version


def unpack(archive: Path, out: Path, python_version: str) -> dict:
    dropped: list[str] = []
    files = size = 0
    with tarfile.open(archive, "r:*") as tar:
        for m in tar.getmembers():
            parts = PurePosixPath(m.name).parts
            if not parts or parts[0] != ROOT or m.name.startswith("/") or ".." in parts:
                raise ArchiveError(f"{archive.name}: {m.name!r} is outside python/ (not an install_only archive)")
            if m.issym() or m.islnk():
                dropped.append(m.name)
                continue
            if m.isdir():
                (out / m.name).mkdir(parents=True, exist_ok=True)
            elif m.isfile():
                dest = out / m.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(m) as src, dest.open("wb") as f:
                    while chunk := src.read(1 << 20):
                        f.write(chunk)
                dest.chmod(0o755 if m.mode & 0o111 else 0o644)
                files += 1
                size += m.size
            # devices, fifos: nothing a Python install needs
    root = out / ROOT
    exe = root / f"bin/python{python_version}"
    if not exe.is_file() or not (root / f"lib/python{python_version}/os.py").is_file():
        raise ArchiveError(
            f"{archive.name}: no python/bin/python{python_version} (a regular file) or "
            f"python/lib/python{python_version}/os.py: not a CPython {python_version} install_only archive"
        )
    return {
        "archive": archive.name,
        "python_version": python_version,
        "version": _full_version(archive.name, root, python_version),
        "executable": f"{ROOT}/bin/python{python_version}",
        "files": files,
        "bytes": size,
        "dropped_links": sorted(dropped),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--python-version", required=True, help="X.Y, e.g. 3.11")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        summary = unpack(args.archive, args.out, args.python_version)
    except (ArchiveError, tarfile.TarError, OSError) as e:
        print(f"portable python: {e}", file=sys.stderr)
        return 1
    (args.out / "python.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
