"""Install one distribution of a packed PEX into site-packages/, compiled: run in the Pants sandbox.

    python -S install_wheel.py wheel <.deps/<wheel> zip> <out>    one locked distribution
    python -S install_wheel.py sources <dir>                        the backend's own files, in place

A packed PEX keeps each distribution as pex's zip of the wheel installed (`.deps/<wheel>`: the
files site-packages gets, the `.dist-info`, and `.prefix/` for what a venv puts outside
site-packages). `wheel` writes the site-packages files into <out> as pip would: the console
scripts and man pages under `.prefix/` are left out (the backend runs none of them, and a
script's shebang names one machine's interpreter). Then every .py file is compiled to
`__pycache__/<name>.cpython-3X.pyc`, hash-based and unchecked (PEP 552), and the distribution's
RECORD is written with every file, the .pyc files included, as pip writes it when it compiles
(pex drops RECORD from its chroot). So the folder starts without
compiling anything, a read-only folder never recompiles in memory, a writable one never writes
`__pycache__`, and RECORD lists every file the distribution installed (the image's layers and the
SBOM read it).

Deterministic: files in sorted order, PYTHONHASHSEED=0 set by the caller (frozenset constants),
the name compiled into each code object relative to site-packages (the import system replaces it
with the real path on load: importlib's _fix_up_module). Run it with the interpreter the folder
runs on: a .pyc is for one CPython minor version.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import json
import py_compile
import sys
import warnings
import zipfile
from pathlib import Path

LAYOUT = ".layout.json"  # pex's record of the installed chroot: where RECORD is
PREFIX = ".prefix/"  # pex's stash of files a venv puts outside site-packages


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def compile_tree(root: Path, only: list[str] | None = None) -> list[str]:
    """Compile every .py under `root` (or the listed ones); the .pyc paths written, relative."""
    written = []
    sources = only if only is not None else sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    for rel in sorted(s for s in sources if s.endswith(".py")):
        source = root / rel
        cfile = Path(importlib.util.cache_from_source(str(source)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in old packages: pip is silent too
            try:
                py_compile.compile(
                    str(source), cfile=str(cfile), dfile=rel, doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
                )
            except py_compile.PyCompileError:
                continue  # not Python 3 (templates, test data): pip skips these as well
        written.append(cfile.relative_to(root).as_posix())
    return written


def install_wheel(deps_zip: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(deps_zip) as zf:
        layout = json.loads(zf.read(LAYOUT)) if LAYOUT in zf.namelist() else {}
        record = layout.get("record_relpath")
        if not record:
            raise SystemExit(f"{deps_zip}: no {LAYOUT} naming its RECORD: not a distribution of pex's packed layout")
        names = []
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            name = info.filename
            if info.is_dir() or name == LAYOUT or name.startswith(PREFIX):
                continue
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            if (info.external_attr >> 16) & 0o111:
                target.chmod(0o755)
            names.append(name)
    names = [n for n in names if n != record]  # pex 2.1.137 drops RECORD from its chroot; written anew
    (out / record).unlink(missing_ok=True)
    files = sorted([*names, *compile_tree(out, names)])
    # RECORD lists every installed file by sha256 and size (PEP 376/627), its own line last.
    buf = io.StringIO()
    rows = [[p, _record_hash((out / p).read_bytes()), str((out / p).stat().st_size)] for p in files]
    csv.writer(buf, lineterminator="\n").writerows([*rows, [record, "", ""]])
    (out / record).write_text(buf.getvalue(), encoding="utf-8")


def main(argv: list[str]) -> int:
    if sys.flags.hash_randomization:
        raise SystemExit("install_wheel.py: run with PYTHONHASHSEED=0 (and without -E/-I), or the .pyc files differ between builds")
    if len(argv) == 3 and argv[0] == "wheel":
        install_wheel(Path(argv[1]), Path(argv[2]))
    elif len(argv) == 2 and argv[0] == "sources":
        compile_tree(Path(argv[1]))
    else:
        raise SystemExit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
