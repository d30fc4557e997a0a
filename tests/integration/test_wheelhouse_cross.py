"""Wheelhouse entries cross-built for another platform (3rdparty/wheelhouse.toml `platform`): the
wheels the bootstrap built are the pinned bytes, tagged cp311 manylinux_2_28_aarch64, every ELF
file EM_AARCH64 (pyelftools and the audit's reader) with no symbol newer than the glibc floor and
nothing NEEDed but glibc; a rebuild from the pinned sdist gives the pinned bytes again; an entry
the builder cannot serve names itself and the fix (an unknown platform fails; a machine that cannot
build the pinned bytes skips it with a warning)."""
from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

CACHE = Path(os.environ.get("LOCALAI_BUILD_CACHE", "~/.cache/localai-build")).expanduser()
# What a manylinux wheel may NEED of its host: glibc's libraries and the aarch64 loader.
GLIBC_SONAMES = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-aarch64.so.1"}


def load(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bootstrap = load("bootstrap", "3rdparty/bootstrap/bootstrap.py")
elf_scan = load("elf_scan", "pants-plugins/localai/package/scripts/elf_scan.py")
MANIFEST = bootstrap.parse_manifest(Path("3rdparty/wheelhouse.toml"))
CROSS = {key: e for key, e in MANIFEST.items() if "platform" in e}


def test_the_compiled_sdist_only_dependencies_are_cross_built() -> None:
    assert {e["requirement"] for e in CROSS.values()} >= {"monotonic-alignment-search==0.2.1", "pybase64==1.0.2"}
    assert all(e["platform"] == "manylinux_2_28_aarch64" and e["python"] == "3.11" for e in CROSS.values())


@pytest.mark.parametrize("key", sorted(CROSS))
def test_the_built_wheel_is_pinned_and_aarch64(key: str) -> None:
    entry = CROSS[key]
    wheel = CACHE / "wheelhouse" / entry["accelerator"] / entry["file"]
    assert wheel.is_file(), f"{wheel} is missing: ./pants builds it on its first run (3rdparty/wheelhouse.toml [{key}])"
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == entry["sha256"]
    assert entry["file"].endswith(f"-cp311-cp311-{entry['platform']}.whl")
    floor = tuple(int(n) for n in re.fullmatch(r"manylinux_(\d+)_(\d+)_aarch64", entry["platform"]).groups())
    with zipfile.ZipFile(wheel) as whl:
        dist_info = next(n.split("/")[0] for n in whl.namelist() if n.endswith(".dist-info/WHEEL"))
        assert f"Tag: cp311-cp311-{entry['platform']}" in whl.read(f"{dist_info}/WHEEL").decode().splitlines()
        assert {i.date_time[:3] for i in whl.infolist()} == {(1980, 1, 1)}
        elves = {n: whl.read(n) for n in whl.namelist() if whl.read(n)[:4] == b"\x7fELF"}
    assert [n for n in elves if n.endswith(".cpython-311-aarch64-linux-gnu.so")] == list(elves), elves.keys()
    for name, data in elves.items():
        elf = ELFFile(io.BytesIO(data))
        assert elf["e_machine"] == "EM_AARCH64", name
        assert elf_scan.machine_of(data) == "aarch64", name
        assert set(elf_scan.needed_libraries(data)) <= GLIBC_SONAMES, name
        versions = {
            tuple(int(n) for n in aux.name[len("GLIBC_"):].split("."))
            for section in elf.iter_sections() if isinstance(section, GNUVerNeedSection)
            for _, auxes in section.iter_versions() for aux in auxes if aux.name.startswith("GLIBC_")
        }
        assert versions and max(versions) <= floor, (name, max(versions))
        # No path of the machine that built it (build folder, CPython, zig).
        assert not re.search(rb"/tmp/|/root/|/home/|\.pyenv", data), name


def test_an_aarch64_wheels_only_lock_finds_them_in_the_wheelhouse(tmp_path) -> None:
    """What a cpu-arm64 resolve's lock does (pex, `--style=strict`, the aarch64 complete platform),
    wheels only (`--no-build`) and with the wheelhouse as the only repository: every sdist-only
    dependency the wheelhouse builds (pure, and cross-compiled) resolves to its wheel there."""
    wanted = {e["requirement"] for key, e in MANIFEST.items() if "sdist_sha256" in e and key != "sox-1.5.0"}
    assert {"antlr4-python3-runtime==4.9.3", "GPUtil==1.4.0"} <= wanted
    wheelhouse = CACHE / "wheelhouse/cpu"
    pex = CACHE / MANIFEST["pex-tool"]["file"]
    out = subprocess.run(
        [python311(), str(pex), "lock", "create", "--style=strict", "--complete-platform",
         "3rdparty/platforms/linux_aarch64-cp311.json", "--no-build", "--intransitive", "--no-pypi",
         f"--find-links=file://{wheelhouse}/", "-o", str(tmp_path / "lock.json"), *sorted(wanted)],
        env={**os.environ, "PEX_SCRIPT": "pex3", "PEX_ROOT": str(tmp_path / "pex-root")}, capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (resolve,) = json.loads((tmp_path / "lock.json").read_text())["locked_resolves"]
    files = {r["project_name"]: [a["url"].rsplit("/", 1)[-1] for a in r["artifacts"]] for r in resolve["locked_requirements"]}
    by_file = {e["file"]: e for e in MANIFEST.values()}
    assert sorted(f for fs in files.values() for f in fs) == sorted(e["file"] for e in by_file.values() if e["requirement"] in wanted)


def python311() -> str:
    """The CPython 3.11 ./pants passes the bootstrap (a real executable, not a pyenv shim)."""
    found = shutil.which("python3.11")
    assert found, "no python3.11 on PATH: ./pants builds the cross entries with it"
    return subprocess.run([found, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                          check=True).stdout.strip()


def one_entry_repo(tmp_path: Path, key: str, entry: dict[str, str]) -> Path:
    root = tmp_path / "repo"
    (root / "3rdparty").mkdir(parents=True)
    (root / "lockfiles").mkdir()
    shutil.copyfile("lockfiles/native-toolchain.lock", root / "lockfiles/native-toolchain.lock")
    (root / "3rdparty/wheelhouse.toml").write_text(f"[{key}]\n" + "".join(f'{k} = "{v}"\n' for k, v in entry.items()))
    return root


def test_a_rebuild_from_the_pinned_sdist_gives_the_pinned_bytes(tmp_path, monkeypatch) -> None:
    """pybase64 (a C extension; the smaller of the two): built again in another folder, with
    another cache, it has the sha256 3rdparty/wheelhouse.toml pins (fill_wheelhouse refuses
    anything else). zig itself comes from the machine's cache when ./pants unpacked it there."""
    monkeypatch.delenv("LOCALAI_WHEELHOUSE_DIRS", raising=False)
    (key,) = [k for k, e in CROSS.items() if e["requirement"] == "pybase64==1.0.2"]
    root = one_entry_repo(tmp_path, key, CROSS[key])
    cache = tmp_path / "cache"
    cache.mkdir()
    if (CACHE / "zig").is_dir():
        (cache / "zig").symlink_to(CACHE / "zig")
    bootstrap.fill_wheelhouse(sys.executable, root, cache, python311())
    wheel = cache / "wheelhouse/cpu" / CROSS[key]["file"]
    assert wheel.is_file(), "the rebuild was skipped (its bytes are not the pin, or it failed): see the captured log"
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == CROSS[key]["sha256"]


def test_an_entry_the_cross_builder_cannot_serve_names_itself_and_the_fix(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("LOCALAI_WHEELHOUSE_DIRS", raising=False)
    entry = dict(next(iter(CROSS.values())), platform="manylinux_2_28_riscv64")
    root = one_entry_repo(tmp_path, "demo", entry)
    with pytest.raises(SystemExit):
        bootstrap.fill_wheelhouse(sys.executable, root, tmp_path / "cache", python311())
    err = capsys.readouterr().err
    assert "3rdparty/wheelhouse.toml [demo]: platform = 'manylinux_2_28_riscv64'" in err and "fix the entry" in err

    # What this machine cannot build to the pinned bytes is skipped with a warning, not built and not
    # fatal (Pants itself does not need it): no CPython 3.11, or another micro version than `headers`.
    for name, python, headers, why in (
        ("b", None, "", "found no CPython 3.11"),
        ("c", python311(), "3.11.0", "its pin was built against CPython 3.11.0's headers and ./pants found CPython 3.11."),
    ):
        root = one_entry_repo(tmp_path / name, "demo", dict(entry, platform="manylinux_2_28_aarch64", headers=headers))
        bootstrap.fill_wheelhouse(sys.executable, root, tmp_path / "cache", python)
        err = capsys.readouterr().err
        assert "wheelhouse: warning: skipped" in err and "entry [demo]" in err and why in err, err
        assert "LOCALAI_WHEELHOUSE_DIRS=<folder>" in err
        assert not (tmp_path / "cache/wheelhouse/cpu" / entry["file"]).exists()
    # Other bytes than the pin (here a file given in LOCALAI_WHEELHOUSE_DIRS) are refused the same way.
    given = tmp_path / "given"
    given.mkdir()
    (given / entry["file"]).write_bytes(b"not the pinned wheel")
    monkeypatch.setenv("LOCALAI_WHEELHOUSE_DIRS", str(given))
    root = one_entry_repo(tmp_path / "d", "demo", dict(entry, platform="manylinux_2_28_aarch64"))
    bootstrap.fill_wheelhouse(sys.executable, root, tmp_path / "cache", python311())
    err = capsys.readouterr().err
    assert "wheelhouse: warning: skipped: hash mismatch for " + entry["file"] in err and "entry [demo]" in err, err
    assert list((tmp_path / "cache/wheelhouse/cpu").iterdir()) == []
