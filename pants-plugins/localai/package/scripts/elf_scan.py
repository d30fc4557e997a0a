"""The shared libraries every ELF file in a PEX (packed directory or zipapp) or wheel NEEDs
(DT_NEEDED), standard library only.

Used two ways: imported by the plugin (and its tests), and run by the audit as a script inside
a sandboxed Pants process, so its result is cached by the artifact's digest:

    python elf_scan.py PATH...   ->  JSON on stdout: [{"archive", "dist", "file", "machine", "needed"}]

``dist`` is the wheel a file comes from: the ``.deps/<wheel>/`` folder of a PEX, or the wheel
file itself; "" for files of the PEX's own sources. ``file`` is its path inside that wheel.
``machine`` is the architecture the ELF header's e_machine names (platform.machine() spelling:
x86_64, aarch64; `e_machine=N` for one this reader does not name), so an arm64 artifact holding an
x86_64 library is found before it fails to load. PyPI's torchaudio 2.11 wheel declares no
dependency yet its libtorchaudio.abi3.so NEEDs libcudart.so.13: only the ELF says so.
"""
from __future__ import annotations

import json
import os
import struct
import sys
import zipfile

ELF_MAGIC = b"\x7fELF"
_SHT_DYNAMIC, _SHT_STRTAB = 6, 3
_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB = 0, 1, 5


# e_machine values (the ELF specification's EM_*), named as platform.machine() names them.
MACHINES = {3: "i386", 8: "mips", 20: "ppc", 21: "ppc64", 22: "s390x", 40: "arm", 62: "x86_64", 183: "aarch64",
            243: "riscv64"}


class NotAnElf(ValueError):
    pass


def machine_of(data: bytes) -> str:
    """The architecture of an ELF image, from e_machine (offset 18, the file's byte order)."""
    end, _ = _layout(data)
    (e_machine,) = struct.unpack_from(end + "H", data, 18)
    return MACHINES.get(e_machine, f"e_machine={e_machine}")


def _layout(data: bytes):
    if data[:4] != ELF_MAGIC or len(data) < 52:
        raise NotAnElf("no ELF magic")
    cls, enc = data[4], data[5]
    if cls not in (1, 2) or enc not in (1, 2):
        raise NotAnElf(f"unknown ELF class {cls} / encoding {enc}")
    end = "<" if enc == 1 else ">"
    is64 = cls == 2
    return end, is64


def _cstr(data: bytes, offset: int) -> str:
    stop = data.find(b"\0", offset)
    return data[offset : stop if stop >= 0 else len(data)].decode("utf-8", "replace")


def _dyn_entries(data: bytes, offset: int, size: int, end: str, is64: bool):
    fmt = end + ("qQ" if is64 else "iI")
    step = struct.calcsize(fmt)
    for pos in range(offset, min(offset + size, len(data)) - step + 1, step):
        tag, val = struct.unpack_from(fmt, data, pos)
        if tag == _DT_NULL:
            return
        yield tag, val


def needed_libraries(data: bytes) -> list[str]:
    """DT_NEEDED entries of an ELF image, in order. Static executables and objects give []."""
    end, is64 = _layout(data)
    if is64:
        (e_phoff, e_shoff) = struct.unpack_from(end + "QQ", data, 32)
        (e_phentsize, e_phnum, e_shentsize, e_shnum) = struct.unpack_from(end + "HHHH", data, 54)
    else:
        (e_phoff, e_shoff) = struct.unpack_from(end + "II", data, 28)
        (e_phentsize, e_phnum, e_shentsize, e_shnum) = struct.unpack_from(end + "HHHH", data, 42)

    # Section headers: .dynamic and the string table it links to.
    sections = []
    for i in range(e_shnum if e_shoff else 0):
        base = e_shoff + i * e_shentsize
        if base + e_shentsize > len(data):
            break
        if is64:
            _, sh_type, _, _, sh_offset, sh_size, sh_link = struct.unpack_from(end + "IIQQQQI", data, base)
        else:
            _, sh_type, _, _, sh_offset, sh_size, sh_link = struct.unpack_from(end + "IIIIIII", data, base)
        sections.append((sh_type, sh_offset, sh_size, sh_link))
    for sh_type, sh_offset, sh_size, sh_link in sections:
        if sh_type == _SHT_DYNAMIC and sh_link < len(sections) and sections[sh_link][0] == _SHT_STRTAB:
            strtab = sections[sh_link][1]
            return [_cstr(data, strtab + v) for t, v in _dyn_entries(data, sh_offset, sh_size, end, is64) if t == _DT_NEEDED]

    # No section headers (stripped with sstrip, say): PT_DYNAMIC, DT_STRTAB mapped through PT_LOAD.
    loads, dynamic = [], None
    for i in range(e_phnum if e_phoff else 0):
        base = e_phoff + i * e_phentsize
        if is64:
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(end + "IIQQQQ", data, base)
        else:
            p_type, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(end + "IIIII", data, base)
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return []
    entries = list(_dyn_entries(data, dynamic[0], dynamic[1], end, is64))
    strtab_vaddr = next((v for t, v in entries if t == _DT_STRTAB), None)
    if strtab_vaddr is None:
        return []
    strtab = next((off + strtab_vaddr - va for va, off, size in loads if va <= strtab_vaddr < va + size), None)
    if strtab is None:
        return []
    return [_cstr(data, strtab + v) for t, v in entries if t == _DT_NEEDED]


def _dist_of(archive: str, member: str) -> tuple[str, str]:
    """(wheel, path inside the wheel) of an archive member."""
    if member.startswith(".deps/") and member.count("/") >= 2:
        _, wheel, inner = member.split("/", 2)
        return wheel, inner
    if archive.endswith(".whl"):
        return os.path.basename(archive), member
    return "", member


def scan_archive(path: str) -> list[dict]:
    """Every ELF member of a zip archive (a zipapp PEX or a wheel) with what it NEEDs."""
    found = []
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if info.is_dir() or info.file_size < 52:
                continue
            with zf.open(info) as fh:
                if fh.read(4) != ELF_MAGIC:
                    continue
            dist, inner = _dist_of(path, info.filename)
            found.append(_elf_entry(path, dist, inner, zf.read(info)))
    return found


def _elf_entry(archive: str, dist: str, file: str, data: bytes) -> dict:
    try:
        needed = needed_libraries(data)
    except (NotAnElf, struct.error) as exc:
        needed = [f"<unreadable ELF: {exc}>"]
    try:
        machine = machine_of(data)
    except (NotAnElf, struct.error) as exc:
        machine = f"<unreadable ELF: {exc}>"
    return {"archive": archive, "dist": dist, "file": file, "machine": machine, "needed": needed}


def scan_directory(path: str) -> list[dict]:
    """Every ELF in a packed PEX (a directory): inside each zip (.deps/<wheel>, one per wheel;
    .bootstrap) and each loose file (the backend's own sources, engine libraries)."""
    found = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            if zipfile.is_zipfile(full):
                found.extend(scan_archive(full))
                continue
            with open(full, "rb") as fh:
                if os.path.getsize(full) < 52 or fh.read(4) != ELF_MAGIC:
                    continue
                fh.seek(0)
                found.append(_elf_entry(path, "", os.path.relpath(full, path), fh.read()))
    return found


def main(argv) -> int:
    report = []
    for path in argv:
        report.extend(scan_directory(path) if os.path.isdir(path) else scan_archive(path))
    json.dump(report, sys.stdout, indent=0, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
