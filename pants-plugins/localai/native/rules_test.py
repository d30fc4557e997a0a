"""RuleRunner tests of the native-engine target and the pure parts of its rules.

The full ggml + engine build (zig, 76 MB sdist, ~2 min) is exercised by
`pants package engines/minilm:<variant>` and engines/minilm/tests, not here."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from pants.core.target_types import FileTarget
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import RuleRunner

from localai.native import register
from localai.native.rules import GgmlBuild, NativeBuildError, NativeEngineFieldSet, metadata_json
from localai.native.target_types import (
    CPU_VARIANTS,
    CpuVariantField,
    IncludeTestBinaryField,
    NativeEngineTarget,
    SanitizerCoverageField,
    TestBinaryField,
)

ENGINE_BUILD = """
native_engine(
    name="{v}",
    cpu_variant="{v}",
    ggml_archive="3rdparty/native:ggml",
    library="libx.so",
    header="include/x.h",
)
"""


@pytest.fixture
def rule_runner() -> RuleRunner:
    return RuleRunner(rules=register.rules(), target_types=[*register.target_types(), FileTarget])


def test_register_exposes_target_and_package_rule():
    assert NativeEngineTarget in register.target_types()
    assert any(getattr(r, "union_base", None) is not None and r.union_member is NativeEngineFieldSet
               for r in register.rules() if hasattr(r, "union_member"))


@pytest.mark.parametrize("variant", CPU_VARIANTS)
def test_native_engine_target(rule_runner, variant):
    rule_runner.write_files({"engines/x/BUILD": ENGINE_BUILD.format(v=variant), "engines/x/CMakeLists.txt": ""})
    tgt = rule_runner.get_target(Address("engines/x", target_name=variant))
    assert tgt[CpuVariantField].value == variant
    assert tgt[IncludeTestBinaryField].value is False
    assert NativeEngineFieldSet.is_applicable(tgt)


def test_unknown_cpu_variant_is_rejected(rule_runner):
    rule_runner.write_files({"engines/x/BUILD": ENGINE_BUILD.format(v="avx9000")})
    with pytest.raises(ExecutionError, match="avx9000"):
        rule_runner.get_target(Address("engines/x", target_name="avx9000"))


def test_metadata_json():
    info = json.dumps({"ggml_version": "0.25.3", "cmake_options": {"GGML_AVX2": "ON"}, "zig_target": "x86_64-linux-gnu.2.28",
                       "sanitizer_coverage": True})
    meta = json.loads(metadata_json(name="minilm", cpu_variant="avx2", library="libminilm.so", lib_sha256="ab" * 32,
                                    header="minilm.h", ggml=GgmlBuild(digest=None, version="0.25.3", build_info=info)))
    assert meta == {"name": "minilm", "cpu_variant": "avx2", "library": "libminilm.so", "sha256": "ab" * 32,
                    "header": "minilm.h", "ggml_version": "0.25.3", "ggml_cmake_options": {"GGML_AVX2": "ON"},
                    "target": "x86_64-linux-gnu.2.28", "sanitizer_coverage": True}


def _driver():
    spec = importlib.util.spec_from_file_location("cmake_driver", Path(__file__).with_name("cmake_driver.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_driver_always_passes_every_isa_option():
    # ggml silently turns every ISA option off when SOURCE_DATE_EPOCH is set: never rely on defaults.
    d = _driver()
    assert set(d.VARIANTS) == set(CPU_VARIANTS)
    for variant, opts in d.VARIANTS.items():
        assert set(opts) == set(d.ISA), variant
    assert set(d.VARIANTS["fallback"].values()) == {"OFF"}
    assert d.VARIANTS["avx2"]["GGML_AVX2"] == "ON" and d.VARIANTS["avx2"]["GGML_AVX512"] == "OFF"
    assert set(d.VARIANTS["avx512"].values()) == {"ON"}


def test_driver_sanitizer_coverage_only_when_asked():
    d = _driver()
    plain = d.cmake_common("/w", "/n/ninja", [("/src", ".")], "avx2")
    fuzz = d.cmake_common("/w", "/n/ninja", [("/src", ".")], "avx2", sanitizer_coverage=True)
    assert not any("-fsanitize" in a for a in plain)
    flags = [a for a in fuzz if a.startswith(("-DCMAKE_C_FLAGS=", "-DCMAKE_CXX_FLAGS="))]
    assert len(flags) == 2 and all(d.SANITIZER_COVERAGE in a for a in flags)
    assert "-DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY" in fuzz


def test_driver_is_hermetic_by_construction(tmp_path, monkeypatch):
    d = _driver()
    args = d.cmake_common("/w", "/n/ninja", [("/src", "."), ("/b", "build")], "avx2")
    assert "-DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF" in args
    assert "-DCMAKE_C_COMPILER=/w/zig-cc" in args and "-DCMAKE_AR=/w/zig-ar" in args
    assert any(a.startswith("-DCMAKE_C_FLAGS=") and "-ffile-prefix-map=/src=." in a for a in args)


def test_localai_engine_macro_declares_variants_cpptests_and_fuzz(rule_runner):
    macros = (Path(__file__).parent.parent / "macros.py").read_text()
    rule_runner.write_files({
        "prelude.py": macros,
        "engines/x/CMakeLists.txt": "",
        "engines/x/BUILD": 'localai_engine(library="libx.so", header="x.h", ggml_archive="3rdparty/native:ggml", '
                           'test_binary="x_tests")',
    })
    rule_runner.set_options(["--build-file-prelude-globs=prelude.py"])
    get = lambda name: rule_runner.get_target(Address("engines/x", target_name=name))  # noqa: E731
    for v in CPU_VARIANTS:
        t = get(v)
        assert (t[CpuVariantField].value, t[IncludeTestBinaryField].value, t[SanitizerCoverageField].value) == (v, False, False)
    cpp = get("avx2-cpptests")
    assert cpp[IncludeTestBinaryField].value and cpp[TestBinaryField].value == "x_tests"
    fuzz = get("fuzz")
    assert fuzz[SanitizerCoverageField].value and fuzz[TestBinaryField].value is None
    assert fuzz[CpuVariantField].value == "fallback"


UPSTREAM_BUILD = """
native_engine(
    name="avx2",
    cpu_variant="avx2",
    ggml_archive="3rdparty/native:ggml",
    ggml_subdir="x.cpp/ggml",
    library="libx.so",
    header="include/x.h",
    upstream_subdir="x.cpp",
    upstream_sources=["src/*.cpp"],
    upstream_include_dirs=["include"],
    upstream_defines=["X_BUILD", 'X_VERSION="1.0"'],
    exports=["x_*"],
    cmake_options={"X_OPT": "ON"},
    sources=[],
)
"""


def test_third_party_engine_fields(rule_runner):
    rule_runner.write_files({"engines/x/BUILD": UPSTREAM_BUILD})
    tgt = rule_runner.get_target(Address("engines/x", target_name="avx2"))
    fs = NativeEngineFieldSet.create(tgt)
    spec = fs.upstream()
    assert spec.subdir == "x.cpp" and spec.exports == ("x_*",) and spec.library == "libx.so"
    argv = spec.argv("a.tar.gz")
    assert argv[:4] == ["--upstream-archive", "a.tar.gz", "--upstream-subdir", "x.cpp"]
    assert ["--export", "x_*"] == argv[argv.index("--export"):argv.index("--export") + 2]
    assert dict(fs.cmake_options.value) == {"X_OPT": "ON"} and fs.ggml_subdir.value == "x.cpp/ggml"


@pytest.mark.parametrize("fields,needs", [
    ('upstream_subdir="x.cpp", exports=["x_*"]', "upstream_sources"),
    ('upstream_subdir="x.cpp", upstream_sources=["a.cpp"]', "exports"),
    ('exports=["x_*"]', "upstream_subdir"),
])
def test_third_party_engine_needs_sources_and_exports(rule_runner, fields, needs):
    rule_runner.write_files({"engines/x/BUILD": f'native_engine(name="avx2", cpu_variant="avx2", '
                                                f'ggml_archive="a:b", library="libx.so", header="x.h", {fields})'})
    fs = NativeEngineFieldSet.create(rule_runner.get_target(Address("engines/x", target_name="avx2")))
    with pytest.raises(NativeBuildError, match=needs):
        fs.upstream()


def test_driver_generates_a_project_exporting_only_the_given_globs(tmp_path):
    import argparse

    d = _driver()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "b.cpp").write_text("")
    (tmp_path / "src" / "a.cpp").write_text("")
    a = argparse.Namespace(upstream_source=["src/*.cpp"], upstream_subdir="x.cpp", upstream_include=["include"],
                           upstream_define=['X_VERSION="1.0"'], export=["x_*", "y_init"], library="libx.so")
    text = d.upstream_project(a, str(tmp_path))
    assert 'add_library(engine SHARED "src/a.cpp" "src/b.cpp")' in text  # sorted: deterministic
    assert 'OUTPUT_NAME "x"' in text and "-Wl,--version-script=" in text and "--build-id=none" in text
    assert '"X_VERSION=\\"1.0\\""' in text  # CMake-quoted: the definition keeps its quotes
    assert (tmp_path / "localai-exports.map").read_text() == "{\n  global:\n    x_*;\n    y_init;\n  local:\n    *;\n};\n"
    with pytest.raises(SystemExit, match="matches no file"):
        d.upstream_project(argparse.Namespace(**{**vars(a), "upstream_source": ["nope/*.c"]}), str(tmp_path))
    with pytest.raises(SystemExit, match="--export"):
        d.upstream_project(argparse.Namespace(**{**vars(a), "export": []}), str(tmp_path))


def test_driver_extra_cmake_options_cannot_override_fixed_ones():
    d = _driver()
    assert d.extra_options(["B=1", "A=x=y"]) == {"A": "x=y", "B": "1"}
    for bad in ("GGML_AVX2=OFF", "GGML_NATIVE=ON", "CMAKE_C_FLAGS=-O0", "novalue"):
        with pytest.raises(SystemExit):
            d.extra_options([bad])


def test_driver_extracts_a_subdirectory_below_the_archive_top(tmp_path):
    import io
    import tarfile

    d = _driver()
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for name in ("pkg-1.0/x.cpp/ggml/CMakeLists.txt", "pkg-1.0/x.cpp/src/a.cpp", "pkg-1.0/other/ggml/z.c"):
            data = b"content"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    out = d.extract_subdir(str(archive), "x.cpp/ggml", str(tmp_path / "out"))
    assert sorted(p.name for p in Path(out).iterdir()) == ["CMakeLists.txt"]
    assert not (tmp_path / "out" / "pkg-1.0" / "other").exists()
    with pytest.raises(SystemExit, match="no missing/"):
        d.extract_subdir(str(archive), "missing", str(tmp_path / "out2"))
