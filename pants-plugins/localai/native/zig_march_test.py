"""Every aarch64 level of the CPU level table, as the driver hands it to ggml (GGML_CPU_ARM_ARCH in
zig's spelling, which ggml's CMake passes on as -march=...), is accepted by the locked zig and
turns on exactly the level's features.

ggml's ARM feature names are ACLE's: DOTPROD is __ARM_FEATURE_DOTPROD, MATMUL_INT8 is
__ARM_FEATURE_MATMUL_INT8, and so on. So the check is the compiler's own predefined macros, plus
compiling an intrinsic of each feature the level has. Runs in the `native-toolchain` resolve: the
zig the engine builds use."""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path("pants-plugins/localai/native/scripts/cmake_driver.py")
TABLE_PATH = Path("backends/common/cpu_levels.json")
TABLE = json.loads(TABLE_PATH.read_text())
ARM = TABLE["platforms"]["aarch64"]
FEATURES = tuple(TABLE["ggml_arm_features"])

# One use of an intrinsic per feature (what ggml's kernels for that feature call).
INTRINSIC = {
    None: "float32x4_t neon(float32x4_t a, float32x4_t b) { return vaddq_f32(a, b); }",
    "DOTPROD": "int32x4_t dot(int32x4_t s, int8x16_t a, int8x16_t b) { return vdotq_s32(s, a, b); }",
    "FP16_VECTOR_ARITHMETIC": "float16x8_t hadd(float16x8_t a, float16x8_t b) { return vaddq_f16(a, b); }",
    "SVE": "uint64_t sve_bytes(void) { return svcntb(); }",
    "MATMUL_INT8": "int32x4_t mmla(int32x4_t s, int8x16_t a, int8x16_t b) { return vmmlaq_s32(s, a, b); }",
}


def _driver():
    spec = importlib.util.spec_from_file_location("cmake_driver", DRIVER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def zig_cc(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/nonexistent", "HOME": str(tmp_path), "ZIG_GLOBAL_CACHE_DIR": str(tmp_path / "zig-cache"),
           "ZIG_LOCAL_CACHE_DIR": str(tmp_path / "zig-local")}
    return subprocess.run([sys.executable, "-m", "ziglang", "cc", "-target", ARM["zig_target"], *args],
                          env=env, capture_output=True, text=True, timeout=300)


def test_every_table_feature_has_an_intrinsic_here():
    assert set(FEATURES) <= set(INTRINSIC), set(FEATURES) - set(INTRINSIC)


@pytest.mark.parametrize("level", ARM["levels"])
def test_zig_accepts_the_level_and_turns_on_exactly_its_features(tmp_path, level):
    built = _driver().CpuLevel(str(TABLE_PATH), level)
    march = f"-march={built.cmake_options['GGML_CPU_ARM_ARCH']}"  # as ggml-cpu/CMakeLists.txt passes it
    features = TABLE["levels"][level]

    empty = tmp_path / "empty.c"
    empty.write_text("")
    macros = zig_cc(tmp_path, march, "-dM", "-E", str(empty))
    assert macros.returncode == 0, macros.stderr
    defined = {f for f in FEATURES if re.search(rf"^#define __ARM_FEATURE_{f} ", macros.stdout, re.M)}
    assert defined == set(features), (level, march, defined)
    assert re.search(r"^#define __ARM_NEON ", macros.stdout, re.M), march

    src = tmp_path / "uses.c"
    src.write_text("#include <stdint.h>\n#include <arm_neon.h>\n"
                   + ("#include <arm_sve.h>\n" if "SVE" in features else "")
                   + "\n".join(INTRINSIC[f] for f in (None, *features)) + "\n")
    obj = tmp_path / "uses.o"
    compiled = zig_cc(tmp_path, march, "-O2", "-c", str(src), "-o", str(obj))
    assert compiled.returncode == 0, (march, compiled.stderr)
    assert int.from_bytes(obj.read_bytes()[18:20], "little") == 183  # EM_AARCH64
    print({"level": level, "ggml": built.arm_march, "zig": march, "features": sorted(defined)}, file=sys.stderr)


def test_a_feature_missing_from_the_spelling_would_show(tmp_path):
    # The check above can fail: dropping the +fp16 translation leaves FP16 vector arithmetic off.
    empty = tmp_path / "empty.c"
    empty.write_text("")
    macros = zig_cc(tmp_path, "-march=generic+v8_2a+dotprod", "-dM", "-E", str(empty))
    assert macros.returncode == 0, macros.stderr
    assert "__ARM_FEATURE_DOTPROD " in macros.stdout
    assert "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC " not in macros.stdout
