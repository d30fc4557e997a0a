"""What the C and Python sides must agree on, checked against each other: the status codes
of include/minilm.h and binding.py, and the CPU levels of the C build (cmake_driver's ISA
options) and the CPU flags binding.py requires before it loads a level (a level whose
library uses an instruction the check does not require is a SIGILL on some machine)."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from engines.minilm import binding

ROOT = Path(__file__).resolve().parents[3]
HEADER = ROOT / "engines/minilm/include/minilm.h"
DRIVER = ROOT / "pants-plugins/localai/native/cmake_driver.py"

# ggml's CMake ISA options -> the /proc/cpuinfo flags a CPU needs to run what they enable
# (GGML_AVX512 compiles with -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw).
ISA_FLAGS = {
    "GGML_SSE42": {"sse4_2"}, "GGML_AVX": {"avx"}, "GGML_AVX2": {"avx2"}, "GGML_FMA": {"fma"},
    "GGML_F16C": {"f16c"}, "GGML_BMI2": {"bmi2"},
    "GGML_AVX512": {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"},
}


def header_status_codes() -> dict[int, str]:
    enum = re.search(r"typedef enum\s*\w*\s*\{(.*?)\}\s*minilm_status;", HEADER.read_text(), re.S)
    assert enum, f"{HEADER}: no `typedef enum {{...}} minilm_status;`"
    body = re.sub(r"/\*.*?\*/", "", enum.group(1), flags=re.S)
    return {int(value): name for name, value in re.findall(r"(MINILM_\w+)\s*=\s*(-?\d+)", body)}


def test_status_codes_agree_with_the_header():
    codes = header_status_codes()
    assert len(codes) >= 10
    assert binding.STATUS == codes


def driver_variants() -> dict[str, dict[str, str]]:
    spec = importlib.util.spec_from_file_location("cmake_driver", DRIVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.VARIANTS


def test_cpu_levels_agree_with_the_build():
    variants = driver_variants()
    assert set(binding.CPU_LEVELS) == set(variants)
    for level, options in variants.items():
        enabled = set().union(*(ISA_FLAGS[opt] for opt, on in options.items() if on == "ON" and opt in ISA_FLAGS))
        unknown = {opt for opt, on in options.items() if on == "ON"} - set(ISA_FLAGS)
        assert not unknown, f"{level}: ISA options without a CPU-flag mapping here: {unknown}"
        assert binding.CPU_LEVELS[level] == enabled, level
