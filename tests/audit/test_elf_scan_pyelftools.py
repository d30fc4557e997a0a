"""The audit's stdlib ELF reader agrees with pyelftools on DT_NEEDED of real libraries: every
shared object of the tests resolve's torch (CPU build) and grpc, and the reader's PEX/wheel
grouping on a zip of them."""
from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile


def load_scanner():
    path = Path("pants-plugins/localai/package/scripts/elf_scan.py")
    spec = importlib.util.spec_from_file_location("elf_scan", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


elf_scan = load_scanner()


def pyelftools_needed(path: Path) -> list[str]:
    with path.open("rb") as fh:
        elf = ELFFile(fh)
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                return [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    return []


def shared_objects() -> list[Path]:
    roots = []
    for name in ("torch", "grpc"):
        spec = importlib.util.find_spec(name)
        roots.append(Path(spec.origin).parent)
    found = sorted(p for root in roots for p in root.rglob("*.so*") if p.is_file() and is_elf(p))
    assert len(found) >= 10, found
    return found


def is_elf(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(4) == b"\x7fELF"


@pytest.mark.parametrize("path", shared_objects(), ids=lambda p: p.name)
def test_needed_libraries_match_pyelftools(path: Path) -> None:
    assert elf_scan.needed_libraries(path.read_bytes()) == pyelftools_needed(path)


def test_scan_archive_groups_pex_members_by_wheel(tmp_path) -> None:
    libs = [p for p in shared_objects() if p.name.startswith("libtorch")][:2]
    pex = tmp_path / "x.pex"
    with zipfile.ZipFile(pex, "w") as zf:
        for lib in libs:
            zf.write(lib, f".deps/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl/torch/lib/{lib.name}")
        zf.writestr("__main__.py", "print('hi')\n")
    found = elf_scan.scan_archive(str(pex))
    assert [(f["dist"], f["file"]) for f in found] == [
        ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", f"torch/lib/{lib.name}") for lib in libs
    ]
    assert [f["needed"] for f in found] == [pyelftools_needed(lib) for lib in libs]
