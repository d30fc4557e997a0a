"""The CPU level table against the ggml each engine is compiled from: for every ISA option of
backends/common/cpu_levels.json, the `-m` flags ggml's CMake adds for it (x86 branch of
ggml-cpu/CMakeLists.txt, in the pinned archive) are exactly the CPU flags the table says a
machine needs, and every other x86 ISA option ggml has is either passed OFF by the driver
(GGML_NATIVE) or OFF by default. So a library never uses an instruction the runtime's check does not require."""
from __future__ import annotations

import importlib.util
import json
import re
import tarfile
from pathlib import Path

import pytest

from localai.native.cpu_levels import _BUILD_ROOT, TABLE_PATH

TABLE = json.loads((_BUILD_ROOT / TABLE_PATH).read_text())


def _driver():
    spec = importlib.util.spec_from_file_location("cmake_driver", Path(__file__).parent / "scripts" / "cmake_driver.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

# Every archive a native_engine's ggml comes from, with ggml's directory below its top one.
ARCHIVES = {
    "3rdparty/native/llama_cpp_python-0.3.36.tar.gz": "vendor/llama.cpp/ggml",
    "3rdparty/native/pywhispercpp-1.5.1.tar.gz": "whisper.cpp/ggml",
}


def read_members(archive: str, paths: tuple[str, ...]) -> dict[str, str]:
    """The text of `<top>/<path>` for each path (top: the archive's own top directory)."""
    out: dict[str, str] = {}
    with tarfile.open(archive) as tf:
        for member in tf:
            rel = member.name.partition("/")[2]
            if rel in paths and member.isfile():
                out[rel] = tf.extractfile(member).read().decode()
                if len(out) == len(paths):
                    break
    assert set(out) == set(paths), f"{archive}: missing {set(paths) - set(out)}"
    return out


def x86_isa_flags(cpu_cmake: str) -> dict[str, set[str]]:
    """{GGML option: the -m flags ggml-cpu adds for it} in the x86 (non-MSVC) branch."""
    start = cpu_cmake.index('GGML_SYSTEM_ARCH STREQUAL "x86"')
    end = cpu_cmake.index("elseif (GGML_SYSTEM_ARCH", start)
    blocks: dict[str, set[str]] = {}
    for m in re.finditer(r"if \((GGML_\w+)\)\n((?:[ \t]*list\(APPEND ARCH_(?:FLAGS|DEFINITIONS)[^)]*\)\n)+)",
                         cpu_cmake[start:end]):
        flags = re.findall(r"ARCH_FLAGS (-m\S+)\)", m.group(2))
        if flags:
            blocks.setdefault(m.group(1), set()).update(flags)
    return blocks


# Where the kernel's name (arch/x86/include/asm/cpufeatures.h) is not gcc's: an underscore more.
KERNEL_SPELLING = {"avx512vnni": "avx512_vnni", "avxvnni": "avx_vnni", "avx512bf16": "avx512_bf16"}


def cpuinfo_name(flag: str) -> str:
    """-msse4.2 -> sse4_2, -mavx512f -> avx512f, -mavx512vnni -> avx512_vnni: the /proc/cpuinfo
    name of what -m<x> enables."""
    name = flag[len("-m"):].replace(".", "_").replace("-", "_")
    return KERNEL_SPELLING.get(name, name)


@pytest.mark.parametrize("archive", sorted(ARCHIVES))
def test_table_flags_are_what_ggml_compiles_for(archive):
    ggml = ARCHIVES[archive]
    cpu_path, top_path = f"{ggml}/src/ggml-cpu/CMakeLists.txt", f"{ggml}/CMakeLists.txt"
    texts = read_members(str(Path(archive)), (cpu_path, top_path))
    blocks = x86_isa_flags(texts[cpu_path])
    assert {"GGML_AVX2", "GGML_AVX512"} <= set(blocks), blocks  # the parser found the x86 branch
    for option, needs in TABLE["ggml_options"].items():
        assert {cpuinfo_name(f) for f in blocks.get(option, ())} == set(needs), (archive, option, blocks.get(option))
    fixed_off = {k for k, v in _driver().GGML_COMMON.items() if v == "OFF"}
    default_off = set(re.findall(r'option\((GGML_\w+)\s+"[^"]*"\s+OFF\)', texts[top_path]))
    others = set(blocks) - set(TABLE["ggml_options"])
    assert not others - fixed_off - default_off, f"{archive}: x86 ISA options neither in the table nor off"


def test_the_check_reads_flags_per_option():
    text = '''elseif (GGML_SYSTEM_ARCH STREQUAL "x86")
                if (GGML_AVX512)
                    list(APPEND ARCH_FLAGS -mavx512f)
                    list(APPEND ARCH_FLAGS -mavx512cd)
                    list(APPEND ARCH_DEFINITIONS GGML_AVX512)
                endif()
                if (GGML_SSE42)
                    list(APPEND ARCH_FLAGS -msse4.2)
                endif()
    elseif (GGML_SYSTEM_ARCH STREQUAL "PowerPC")
                if (GGML_LSX)
                    list(APPEND ARCH_FLAGS -mlsx)
'''
    blocks = x86_isa_flags(text)
    assert blocks == {"GGML_AVX512": {"-mavx512f", "-mavx512cd"}, "GGML_SSE42": {"-msse4.2"}}
    assert {cpuinfo_name(f) for f in blocks["GGML_SSE42"]} == {"sse4_2"}


def arm_variants(src_cmake: str) -> dict[str, tuple[str, ...]]:
    """{variant: its features} of ggml's Linux ARM CPU variants (ggml/src/CMakeLists.txt,
    `ggml_add_cpu_backend_variant(armv8.2_2 DOTPROD FP16_VECTOR_ARITHMETIC)`)."""
    found = re.findall(r"ggml_add_cpu_backend_variant\((armv[\w.]+)((?:[ \t]+\w+)*)\)", src_cmake)
    return {name: tuple(features.split()) for name, features in found}


def arm_march_rules(cpu_cmake: str) -> dict[str, tuple[str, str]]:
    """{feature: (the -march it bumps to or "" , the +tag it adds)} from ggml-cpu's
    GGML_CPU_ALL_VARIANTS branch for ARM, in ggml's order."""
    start = cpu_cmake.index("elseif(GGML_CPU_ALL_VARIANTS)")
    end = cpu_cmake.index('list(APPEND ARCH_FLAGS "-march=${ARM_MCPU}${ARCH_TAGS}")', start)
    rules = {}
    for m in re.finditer(r"if \(GGML_INTERNAL_(\w+)\)\n(.*?)endif\(\)", cpu_cmake[start:end], re.S):
        march = re.search(r'set\(ARM_MCPU "([^"]+)"\)', m.group(2))
        tag = re.search(r'set\(ARCH_TAGS "\$\{ARCH_TAGS\}(\+\w+)"\)', m.group(2))
        rules[m.group(1)] = (march.group(1) if march else "", tag.group(1) if tag else "")
    return rules


def test_arm_levels_are_ggmls_own_variants():
    # The aarch64 levels are the llama.cpp sdist's ggml (the engines' ggml) CPU variants, and each
    # feature's -march bump and +tag are what ggml's CMake gives it.
    archive = "3rdparty/native/llama_cpp_python-0.3.36.tar.gz"
    ggml = ARCHIVES[archive]
    src_path, cpu_path = f"{ggml}/src/CMakeLists.txt", f"{ggml}/src/ggml-cpu/CMakeLists.txt"
    texts = read_members(archive, (src_path, cpu_path))
    variants, rules = arm_variants(texts[src_path]), arm_march_rules(texts[cpu_path])
    assert {"armv8.0_1", "armv8.2_2", "armv8.6_1"} <= set(variants) and "DOTPROD" in rules, (variants, rules)
    for level in TABLE["platforms"]["aarch64"]["levels"]:
        assert tuple(TABLE["levels"][level]) == variants[TABLE["ggml_variant"][level]], level
    features = TABLE["ggml_arm_features"]
    assert list(features) == [f for f in rules if f in features]  # ggml's order: the tags' order
    for feature, spec in features.items():
        assert (spec["march"], spec["tag"]) == rules[feature], feature
    assert 'set(ARM_MCPU "armv8-a")' in texts[cpu_path]
    assert TABLE["platforms"]["aarch64"]["march_baseline"] == "armv8-a"


def test_the_arm_parsers_read_ggmls_shapes():
    src = "ggml_add_cpu_backend_variant(armv8.0_1)\n    ggml_add_cpu_backend_variant(armv8.2_1    DOTPROD)\n"
    assert arm_variants(src) == {"armv8.0_1": (), "armv8.2_1": ("DOTPROD",)}
    cpu = '''elseif(GGML_CPU_ALL_VARIANTS)
                    if (GGML_INTERNAL_DOTPROD)
                        set(ARM_MCPU "armv8.2-a")
                        set(ARCH_TAGS "${ARCH_TAGS}+dotprod")
                    endif()
                    if (GGML_INTERNAL_NOSVE)
                        set(ARCH_TAGS "${ARCH_TAGS}+nosve")
                    endif()
                    list(APPEND ARCH_FLAGS "-march=${ARM_MCPU}${ARCH_TAGS}")'''
    assert arm_march_rules(cpu) == {"DOTPROD": ("armv8.2-a", "+dotprod"), "NOSVE": ("", "+nosve")}
