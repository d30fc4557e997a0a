"""Install one distribution of a packed PEX into site-packages/, compiled: run in the Pants sandbox.

    python -S install_wheel.py wheel <.deps/<wheel>> <out>    one locked distribution
    python -S install_wheel.py sources <dir>                  the backend's own files, in place

A packed PEX built with `--no-pre-install-wheels` keeps each locked wheel as it was downloaded
(`.deps/<wheel>`, the sha256 the lock pins). `wheel` installs it into <out> as pip would
(PEP 427): the files at the wheel's root and those of `<name>.data/purelib` and `platlib` go into
site-packages; the `.data/` scripts, headers and data (console scripts, man pages: what a venv
puts outside site-packages) are left out, as the backend runs none of them and a script's
shebang names one machine's interpreter. Then every .py file is compiled to
`__pycache__/<name>.cpython-3X.pyc`, hash-based and unchecked (PEP 552), and the distribution's
RECORD is rewritten with every installed file, the .pyc files included, as pip writes it when it
compiles. So the folder starts without
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
import py_compile
import sys
import warnings
import zipfile
from pathlib import Path

DATA_INTO_SITE_PACKAGES = ("purelib", "platlib")  # PEP 427 .data/ subdirectories site-packages gets


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


def _site_packages_name(name: str, data_dir: str) -> str | None:
    """Where a wheel member goes in site-packages, or None for what a venv puts elsewhere."""
    if not name.startswith(data_dir):
        return name
    kind, _, rest = name[len(data_dir) :].partition("/")
    return rest if kind in DATA_INTO_SITE_PACKAGES and rest else None


def install_wheel(wheel: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        members = [i for i in zf.infolist() if not i.is_dir()]
        dist_infos = {i.filename.split("/", 1)[0] for i in members if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/WHEEL")}
        if len(dist_infos) != 1:
            raise SystemExit(f"{wheel}: {len(dist_infos)} top-level .dist-info/WHEEL files, expected 1: not a wheel (PEP 427)")
        dist_info = dist_infos.pop()
        record = f"{dist_info}/RECORD"
        data_dir = dist_info[: -len(".dist-info")] + ".data/"
        names = []
        for info in sorted(members, key=lambda i: i.filename):
            name = _site_packages_name(info.filename, data_dir)
            if name is None or name == record:  # RECORD is written anew below, with the .pyc files
                continue
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            if (info.external_attr >> 16) & 0o111:
                target.chmod(0o755)
            names.append(name)
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
