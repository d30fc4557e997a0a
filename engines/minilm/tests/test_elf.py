"""The packaged libraries: glibc symbol versions <= 2.28, only the C ABI exported, no host
toolchain traces, build-record.json matches (its CPU level and the CPU flags it needs). Reads the ELF with pyelftools (no host binutils)."""
from __future__ import annotations

import hashlib
import json
import re

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from minilm_ctypes import CPU_LEVELS, LEVELS, library_path  # pants: no-infer-dep

ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2"}


def glibc_versions(elf) -> set[tuple[int, ...]]:
    out = set()
    for sec in elf.iter_sections():
        if isinstance(sec, GNUVerNeedSection):
            for _, auxes in sec.iter_versions():
                for aux in auxes:
                    m = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", aux.name)
                    if m:
                        out.add(tuple(int(x) for x in m.group(1).split(".")))
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_elf(level):
    path = library_path(level)
    with open(path, "rb") as f:
        elf = ELFFile(f)
        versions = glibc_versions(elf)
        assert versions and max(versions) <= (2, 28), sorted(versions)
        dyn = next(s for s in elf.iter_sections() if isinstance(s, DynamicSection))
        needed = {t.needed for t in dyn.iter_tags() if t.entry.d_tag == "DT_NEEDED"}
        assert needed <= ALLOWED_NEEDED, needed
        exported = {
            s.name for s in elf.get_section_by_name(".dynsym").iter_symbols()
            if s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK") and s.name
        }
        assert exported and all(n.startswith("minilm_") for n in exported), sorted(exported)[:20]
        assert elf.get_section_by_name(".symtab") is None, "not stripped"
        comment = elf.get_section_by_name(".comment")
        text = comment.data().decode(errors="replace") if comment else ""
        assert "GCC" not in text, text
    print(json.dumps({"level": level, "max_glibc": ".".join(map(str, max(versions))), "needed": sorted(needed),
                      "exported": len(exported)}))
    record = json.loads((path.parent / "build-record.json").read_text())
    assert record["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert record["cpu_level"] == level and record["ggml_version"] == "0.25.3"
    # What the runtime checks before loading it is what the build compiled it for.
    assert set(record["cpu_flags"]) == CPU_LEVELS[level]
    assert (path.parent / "minilm.h").is_file()
