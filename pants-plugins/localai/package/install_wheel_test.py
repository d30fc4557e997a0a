"""scripts/install_wheel.py run as packaging runs it: a subprocess, `python -S`, PYTHONHASHSEED=0."""
from __future__ import annotations

import base64
import csv
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import localai.package.scripts.install_wheel as install_wheel

SCRIPT = install_wheel.__file__
TAG = sys.implementation.cache_tag  # cpython-39 here: the .pyc is for the interpreter that runs it


def _wheel(path: Path) -> Path:
    """A wheel as the lock pins it and pex keeps it (.deps/<wheel>): its RECORD, and a .data/ dir."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("demo/__init__.py", "KINDS = {'a', 'b', 'c', 'd'}\nVALUE = 'built' if 'a' in KINDS else 'no'\n")
        zf.writestr("demo/py2.py", "print 'not python 3'\n")
        tool = zipfile.ZipInfo("demo/bin/tool")
        tool.external_attr = 0o755 << 16
        zf.writestr(tool, "#!/bin/sh\n")
        zf.writestr("demo-1.0.data/platlib/demo_native.py", "NATIVE = 1\n")
        zf.writestr("demo-1.0.data/scripts/demo", "#!python\n")
        zf.writestr("demo-1.0.data/data/share/man/man1/demo.1", "man\n")
        zf.writestr("demo-1.0.dist-info/METADATA", "Name: demo\nVersion: 1.0\n")
        zf.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        zf.writestr("demo-1.0.dist-info/RECORD", "demo/__init__.py,,\n")
    return path


def _run(*args: str, seed: str | None = "0") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    env.update({"PYTHONHASHSEED": seed} if seed is not None else {})
    return subprocess.run([sys.executable, "-S", SCRIPT, *args], env=env, capture_output=True, text=True)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_installs_compiles_and_records_every_file_the_same_way_twice(tmp_path: Path) -> None:
    deps = _wheel(tmp_path / "demo-1.0-py3-none-any.whl")
    for out in ("one", "some/other/two"):
        assert _run("wheel", str(deps), str(tmp_path / out)).returncode == 0
    one = _tree(tmp_path / "one")
    assert one == _tree(tmp_path / "some/other/two")  # bytecode included: no path, no time, no hash seed in it
    # Site-packages files only: .data/platlib moved in, no console script or man page of .data/.
    assert sorted(one) == [
        f"__pycache__/demo_native.{TAG}.pyc", "demo-1.0.dist-info/METADATA", "demo-1.0.dist-info/RECORD",
        "demo-1.0.dist-info/WHEEL", "demo/__init__.py", f"demo/__pycache__/__init__.{TAG}.pyc", "demo/bin/tool",
        "demo/py2.py", "demo_native.py",
    ]
    assert os.access(tmp_path / "one/demo/bin/tool", os.X_OK) and not os.access(tmp_path / "one/demo/__init__.py", os.X_OK)
    pyc = one[f"demo/__pycache__/__init__.{TAG}.pyc"]
    assert int.from_bytes(pyc[4:8], "little") == 0b01  # PEP 552: hash-based, source unchecked
    # RECORD: every file with pip's sha256 and size, the .pyc included, its own line last and empty.
    rows = list(csv.reader((tmp_path / "one/demo-1.0.dist-info/RECORD").read_text().splitlines()))
    assert rows[-1] == ["demo-1.0.dist-info/RECORD", "", ""]
    for name, digest, size in rows[:-1]:
        data = one[name]
        assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert size == str(len(data))
    assert sorted(r[0] for r in rows) == sorted(one)


def test_the_bytecode_is_what_imports_without_reading_the_source(tmp_path: Path) -> None:
    """Unchecked: the interpreter takes the .pyc as it is, so a read-only folder never recompiles
    (the source changed after the build is not even looked at)."""
    assert _run("wheel", str(_wheel(tmp_path / "d.whl")), str(tmp_path / "site")).returncode == 0
    (tmp_path / "site/demo/__init__.py").write_text("VALUE = 'source read'\n")
    out = subprocess.run([sys.executable, "-B", "-S", "-c", "import sys; sys.path.insert(0, 'site'); import demo; print(demo.VALUE)"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.stdout.strip() == "built", out.stderr


def test_sources_are_compiled_in_place(tmp_path: Path) -> None:
    (tmp_path / "src/localai_backend").mkdir(parents=True)
    (tmp_path / "src/localai_backend/backend.py").write_text("def main():\n    return 0\n")
    assert _run("sources", str(tmp_path / "src")).returncode == 0
    assert (tmp_path / f"src/localai_backend/__pycache__/backend.{TAG}.pyc").is_file()


def test_refuses_a_random_hash_seed_and_a_zip_that_is_no_wheel(tmp_path: Path) -> None:
    deps = _wheel(tmp_path / "d.whl")
    out = _run("wheel", str(deps), str(tmp_path / "out"), seed=None)
    assert out.returncode != 0 and "PYTHONHASHSEED=0" in out.stderr
    with zipfile.ZipFile(tmp_path / "plain.whl", "w") as zf:
        zf.writestr("x.py", "")
    out = _run("wheel", str(tmp_path / "plain.whl"), str(tmp_path / "out2"))
    assert out.returncode != 0 and "plain.whl: 0 top-level .dist-info/WHEEL files, expected 1" in out.stderr
