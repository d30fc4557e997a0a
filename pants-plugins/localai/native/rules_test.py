"""RuleRunner tests of the native-engine target and the pure parts of its rules.

The full ggml + engine build (zig, 76 MB sdist, ~2 min) is exercised by
`pants package engines/minilm:<level>` and engines/minilm/tests, not here."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from pants.core.target_types import FileTarget
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from localai import register
from localai.native import cpu_levels, model_conversion
from localai.native import rules as native_rules
from localai.native import target_types as native_target_types
from localai.native.cpu_levels import _BUILD_ROOT, TABLE_PATH, CpuLevelTable, CpuLevelTableError, level_platforms
from localai.native.rules import GgmlBuild, NativeBuildError, NativeEngineFieldSet, engine_record_json
from localai.native.target_types import (
    CPU_LEVELS,
    CpuLevelField,
    IncludeTestBinaryField,
    NativeEngineTarget,
    SanitizerCoverageField,
    TestBinaryField,
)

ENGINE_BUILD = """
native_engine(
    name="{v}",
    cpu_level="{v}",
    ggml_archive="3rdparty/native:ggml",
    library="libx.so",
    header="include/x.h",
)
"""


@pytest.fixture
def rule_runner() -> RuleRunner:
    # The native rules alone: they need nothing of the rest of the plugin.
    return RuleRunner(rules=[*native_rules.rules(), *cpu_levels.rules(), *model_conversion.rules(), QueryRule(CpuLevelTable, [])],
                      target_types=[*native_target_types.target_types(), *model_conversion.target_types(), FileTarget],
                      aliases=[register.build_file_aliases()])


def test_register_exposes_target_and_package_rule():
    assert NativeEngineTarget in register.target_types()
    assert any(getattr(r, "union_base", None) is not None and r.union_member is NativeEngineFieldSet
               for r in register.rules() if hasattr(r, "union_member"))


TABLE = json.loads((_BUILD_ROOT / TABLE_PATH).read_text())


def test_level_names_come_from_the_table():
    assert CPU_LEVELS == tuple(TABLE["levels"]) and {"fallback", "avx2", "avx512"} <= set(CPU_LEVELS)
    assert register.build_file_aliases().objects["LOCALAI_CPU_LEVELS"] == CPU_LEVELS


@pytest.mark.parametrize("level", CPU_LEVELS)
def test_native_engine_target(rule_runner, level):
    rule_runner.write_files({"engines/x/BUILD": ENGINE_BUILD.format(v=level), "engines/x/CMakeLists.txt": ""})
    tgt = rule_runner.get_target(Address("engines/x", target_name=level))
    assert tgt[CpuLevelField].value == level
    assert tgt[IncludeTestBinaryField].value is False
    assert NativeEngineFieldSet.is_applicable(tgt)


def test_unknown_cpu_level_is_rejected(rule_runner):
    rule_runner.write_files({"engines/x/BUILD": ENGINE_BUILD.format(v="avx9000")})
    with pytest.raises(ExecutionError, match="avx9000"):
        rule_runner.get_target(Address("engines/x", target_name="avx9000"))


def test_the_build_reads_the_table_through_the_engine(rule_runner):
    # Not the copy read at plugin load: the file in the build root, whose digest goes into every
    # ggml/engine process (so editing it rebuilds them).
    rule_runner.write_files({TABLE_PATH: json.dumps({"ggml_options": {}, "levels": {"v9": [], "v1": [], "a1": []},
                                                     "platforms": {"x86_64": {"levels": ["v9", "v1"]},
                                                                   "aarch64": {"levels": ["a1"]}}})})
    table = rule_runner.request(CpuLevelTable, [])
    assert table.levels == ("v9", "v1", "a1")
    assert (table.platform("v1"), table.platform("a1")) == ("x86_64", "aarch64")
    table.check("v1", "engines/x:v1")
    with pytest.raises(CpuLevelTableError, match=r"engines/x:avx2: cpu_level='avx2' is not a level of "
                                                 r"backends/common/cpu_levels.json \(v9, v1, a1\)"):
        table.check("avx2", "engines/x:avx2")


def test_engine_record_json():
    info = json.dumps({"ggml_version": "0.25.3", "cmake_options": {"GGML_AVX2": "ON"}, "zig_target": "x86_64-linux-gnu.2.28",
                       "sanitizer_coverage": True, "cpu_level": "avx2", "cpu_flags": ["avx", "avx2"],
                       "defines": ["GGML_MAX_NAME=128"]})
    meta = json.loads(engine_record_json(name="minilm", cpu_level="avx2", library="libminilm.so", lib_sha256="ab" * 32,
                                        header="minilm.h", ggml=GgmlBuild(digest=None, version="0.25.3", build_info=info),
                                        source={"archive": "3rdparty/native:sdist", "url": "https://x/s.tar.gz", "sha256": "cd" * 32}))
    assert meta == {"name": "minilm", "cpu_level": "avx2", "cpu_flags": ["avx", "avx2"], "library": "libminilm.so",
                    "sha256": "ab" * 32, "header": "minilm.h", "ggml_version": "0.25.3",
                    "ggml_cmake_options": {"GGML_AVX2": "ON"}, "ggml_defines": ["GGML_MAX_NAME=128"],
                    "target": "x86_64-linux-gnu.2.28", "sanitizer_coverage": True, "platform": "x86_64",
                    "source": {"archive": "3rdparty/native:sdist", "url": "https://x/s.tar.gz", "sha256": "cd" * 32}}


def test_engine_record_json_names_ggmls_arm_march():
    info = json.dumps({"cmake_options": {"GGML_CPU_ARM_ARCH": "generic"}, "zig_target": "aarch64-linux-gnu.2.28",
                       "cpu_level": "arm64-neon", "cpu_flags": [], "platform": "aarch64", "ggml_arm_march": "armv8-a"})
    meta = json.loads(engine_record_json(name="minilm", cpu_level="arm64-neon", library="libminilm.so", lib_sha256="ab" * 32,
                                        header="minilm.h", ggml=GgmlBuild(digest=None, version="0.25.3", build_info=info),
                                        source={}))
    assert (meta["platform"], meta["ggml_arm_march"], meta["ggml_cmake_options"]) == (
        "aarch64", "armv8-a", {"GGML_CPU_ARM_ARCH": "generic"})


def _driver():
    spec = importlib.util.spec_from_file_location("cmake_driver", Path(__file__).parent / "scripts" / "cmake_driver.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _level(name: str):
    return _driver().CpuLevel(str(_BUILD_ROOT / TABLE_PATH), name)


X86_LEVELS = tuple(TABLE["platforms"]["x86_64"]["levels"])
ARM_LEVELS = tuple(TABLE["platforms"]["aarch64"]["levels"])


def test_every_level_has_one_platform():
    assert set(X86_LEVELS) | set(ARM_LEVELS) == set(CPU_LEVELS) and not set(X86_LEVELS) & set(ARM_LEVELS)
    assert X86_LEVELS == ("avx512", "avx2", "fallback")  # today's names and builds, unchanged
    with pytest.raises(CpuLevelTableError, match="exactly one platform"):
        level_platforms(json.dumps({"levels": {"a": []}, "platforms": {"x86_64": {"levels": []}}}))


def test_driver_always_passes_every_isa_option():
    # ggml silently turns every ISA option off when SOURCE_DATE_EPOCH is set: never rely on defaults.
    for name in X86_LEVELS:
        level = _level(name)
        assert list(level.cmake_options) == list(TABLE["ggml_options"]), name
        on = {o for o, v in level.cmake_options.items() if v == "ON"}
        assert on == set(TABLE["levels"][name]), name
        args = _driver().cmake_common("/w", "/n/ninja", [], level)
        assert [a for a in args if a.startswith("-DGGML_")] == [f"-D{o}={v}" for o, v in level.cmake_options.items()]
    assert set(_level("fallback").cmake_options.values()) == {"OFF"} and _level("fallback").cpu_flags == []
    avx2 = _level("avx2")
    assert avx2.cmake_options["GGML_AVX2"] == "ON" and avx2.cmake_options["GGML_AVX512"] == "OFF"
    assert avx2.cpu_flags == ["avx", "avx2", "bmi2", "f16c", "fma", "sse4_2"]
    assert set(_level("avx512").cmake_options.values()) == {"ON"}
    assert set(_level("avx512").cpu_flags) == set(avx2.cpu_flags) | {"avx512f", "avx512cd", "avx512vl", "avx512dq",
                                                                     "avx512bw", "avx512_vnni"}
    x86 = _driver().cmake_common("/w", "/n/ninja", [], avx2)
    assert not any(a.startswith(("-DCMAKE_SYSTEM_NAME", "-DGGML_CPU_ARM_ARCH")) for a in x86)  # as before


def test_driver_builds_arm_levels_with_ggmls_march_for_aarch64():
    # ggml's ARM path takes one -march (GGML_CPU_ARM_ARCH), the one its CPU variants compute ...
    assert {name: _level(name).arm_march for name in ARM_LEVELS} == {
        "arm64-neon": "armv8-a", "arm64-dotprod": "armv8.2-a+dotprod+fp16", "arm64-sve": "armv8.2-a+dotprod+fp16+sve",
        "arm64-i8mm": "armv8.6-a+dotprod+fp16+sve+i8mm"}
    # ... given in zig's spelling (zig cc rejects armv8-a as "unknown CPU"; zig_march_test.py runs zig on each).
    marches = {name: _level(name).cmake_options for name in ARM_LEVELS}
    assert marches == {"arm64-neon": {"GGML_CPU_ARM_ARCH": "generic"},
                       "arm64-dotprod": {"GGML_CPU_ARM_ARCH": "generic+v8_2a+dotprod+fullfp16"},
                       "arm64-sve": {"GGML_CPU_ARM_ARCH": "generic+v8_2a+dotprod+fullfp16+sve"},
                       "arm64-i8mm": {"GGML_CPU_ARM_ARCH": "generic+v8_6a+dotprod+fullfp16+sve+i8mm"}}
    assert {_level(name).arm_march for name in X86_LEVELS} == {None}
    assert _level("arm64-neon").cpu_flags == [] and _level("arm64-i8mm").cpu_flags == ["asimddp", "asimdhp", "i8mm", "sve"]
    level = _level("arm64-dotprod")
    assert level.platform.zig_target == "aarch64-linux-gnu.2.28"
    args = _driver().cmake_common("/w", "/n/ninja", [], level)
    assert "-DCMAKE_SYSTEM_NAME=Linux" in args and "-DCMAKE_SYSTEM_PROCESSOR=aarch64" in args
    assert [a for a in args if a.startswith("-DGGML_")] == ["-DGGML_CPU_ARM_ARCH=generic+v8_2a+dotprod+fullfp16"]
    with pytest.raises(SystemExit, match="GGML_CPU_ARM_ARCH"):
        _driver().extra_options(["GGML_CPU_ARM_ARCH=native"], level)


def test_zig_spelling_of_ggmls_arm_architectures():
    d = _driver()
    assert d.zig_arm_cpu("armv8-a") == "generic"
    assert d.zig_arm_cpu("armv8.6-a+dotprod+fp16+sve+i8mm") == "generic+v8_6a+dotprod+fullfp16+sve+i8mm"
    assert d.zig_arm_cpu("armv9.2-a+sme") == "generic+v9_2a+sme"  # ggml's SME variant
    assert d.zig_arm_cpu("armv8.2-a+nosve") == "generic+v8_2a-sve"
    with pytest.raises(SystemExit, match=r"-march=armv8.2-a\+crypto: no zig spelling for \['\+crypto'\]"):
        d.zig_arm_cpu("armv8.2-a+crypto")
    with pytest.raises(SystemExit, match="not an ARM architecture name: 'cortex-a76'"):
        d.zig_arm_cpu("cortex-a76")


def test_driver_rejects_a_level_or_option_the_table_does_not_define(tmp_path):
    d = _driver()
    with pytest.raises(SystemExit, match="--cpu-level avx9000: not a level of .*cpu_levels.json"):
        _level("avx9000")
    bad = tmp_path / "t.json"
    platforms = {"x86_64": {"zig_target": "x86_64-linux-gnu.2.28", "cmake_system_processor": "x86_64", "levels": ["x"]}}
    bad.write_text(json.dumps({"ggml_options": {"GGML_AVX": ["avx"]}, "levels": {"x": ["GGML_AVX", "GGML_AMX"]},
                               "platforms": platforms}))
    with pytest.raises(SystemExit, match=r"level x turns on \['GGML_AMX'\], which are not in ggml_options"):
        d.CpuLevel(str(bad), "x")
    bad.write_text(json.dumps({"ggml_options": {}, "levels": {"x": []}, "platforms": {}}))
    with pytest.raises(SystemExit, match="level x is listed by 0 platforms"):
        d.CpuLevel(str(bad), "x")


def test_driver_sanitizer_coverage_only_when_asked():
    d = _driver()
    plain = d.cmake_common("/w", "/n/ninja", [("/src", ".")], _level("avx2"))
    fuzz = d.cmake_common("/w", "/n/ninja", [("/src", ".")], _level("avx2"), sanitizer_coverage=True)
    assert not any("-fsanitize" in a for a in plain)
    flags = [a for a in fuzz if a.startswith(("-DCMAKE_C_FLAGS=", "-DCMAKE_CXX_FLAGS="))]
    assert len(flags) == 2 and all(d.SANITIZER_COVERAGE in a for a in flags)
    assert "-DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY" in fuzz


def test_driver_is_hermetic_by_construction(tmp_path, monkeypatch):
    d = _driver()
    args = d.cmake_common("/w", "/n/ninja", [("/src", "."), ("/b", "build")], _level("avx2"))
    assert "-DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF" in args
    assert "-DCMAKE_C_COMPILER=/w/zig-cc" in args and "-DCMAKE_AR=/w/zig-ar" in args
    assert any(a.startswith("-DCMAKE_C_FLAGS=") and "-ffile-prefix-map=/src=." in a for a in args)


def test_localai_engine_macro_declares_levels_cpptests_and_fuzz(rule_runner):
    macros = (Path(__file__).parent.parent / "macros.py").read_text()
    rule_runner.write_files({
        "prelude.py": macros,
        "engines/x/CMakeLists.txt": "",
        "engines/x/BUILD": 'localai_engine(library="libx.so", header="x.h", ggml_archive="3rdparty/native:ggml", '
                           'test_binary="x_tests")',
    })
    rule_runner.set_options(["--build-file-prelude-globs=prelude.py"])
    get = lambda name: rule_runner.get_target(Address("engines/x", target_name=name))  # noqa: E731 (a one-line local helper)
    for level in CPU_LEVELS:
        t = get(level)
        assert (t[CpuLevelField].value, t[IncludeTestBinaryField].value, t[SanitizerCoverageField].value) == (
            level, False, False)
    cpp = get("avx2-cpptests")
    assert cpp[IncludeTestBinaryField].value and cpp[TestBinaryField].value == "x_tests"
    fuzz = get("fuzz")
    assert fuzz[SanitizerCoverageField].value and fuzz[TestBinaryField].value is None
    assert fuzz[CpuLevelField].value == "fallback"


def test_localai_engine_macro_builds_only_the_levels_asked_for(rule_runner):
    macros = (Path(__file__).parent.parent / "macros.py").read_text()
    rule_runner.write_files({
        "prelude.py": macros,
        "engines/x/CMakeLists.txt": "",
        "engines/x/BUILD": 'localai_engine(library="libx.so", header="x.h", ggml_archive="3rdparty/native:ggml", '
                           'cpu_levels=["avx2"], fuzz=False)',
    })
    rule_runner.set_options(["--build-file-prelude-globs=prelude.py"])
    assert rule_runner.get_target(Address("engines/x", target_name="avx2"))[CpuLevelField].value == "avx2"
    for absent in ("fallback", "avx512", "fuzz"):
        with pytest.raises(ExecutionError, match=f"engines/x:{absent}"):
            rule_runner.get_target(Address("engines/x", target_name=absent))


UPSTREAM_BUILD = """
native_engine(
    name="avx2",
    cpu_level="avx2",
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
    ggml_defines=["GGML_MAX_NAME=128"],
    sources=[],
)
"""


def test_third_party_engine_fields(rule_runner):
    rule_runner.write_files({"engines/x/BUILD": UPSTREAM_BUILD})
    tgt = rule_runner.get_target(Address("engines/x", target_name="avx2"))
    fs = NativeEngineFieldSet.create(tgt)
    spec = fs.upstream()
    assert spec.subdir == "x.cpp" and spec.exports == ("x_*",) and spec.library == "libx.so"
    argv = spec.objects_argv("a.tar.gz")
    assert argv[:4] == ["--upstream-archive", "a.tar.gz", "--upstream-subdir", "x.cpp"]
    # The compile step knows nothing of the link: its cache key is the same for every CPU level
    # and independent of the exported API.
    assert "--export" not in argv and "--library" not in argv and "avx2" not in argv
    assert spec.link_argv() == ["--library", "libx.so", "--export", "x_*"]
    assert dict(fs.cmake_options.value) == {"X_OPT": "ON"} and fs.ggml_subdir.value == "x.cpp/ggml"
    assert fs.ggml_defines.value == ("GGML_MAX_NAME=128",)


@pytest.mark.parametrize("fields,needs", [
    ('upstream_subdir="x.cpp", exports=["x_*"]', "upstream_sources"),
    ('upstream_subdir="x.cpp", upstream_sources=["a.cpp"]', "exports"),
    ('exports=["x_*"]', "upstream_subdir"),
])
def test_third_party_engine_needs_sources_and_exports(rule_runner, fields, needs):
    rule_runner.write_files({"engines/x/BUILD": f'native_engine(name="avx2", cpu_level="avx2", '
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
                           upstream_define=['X_VERSION="1.0"'], ggml_define=["GGML_MAX_NAME=128"])
    text = d.upstream_project(a, str(tmp_path), "/g/include")
    assert 'add_library(upstream STATIC "src/a.cpp" "src/b.cpp")' in text  # sorted: deterministic
    assert '"include" "/g/include"' in text and "VISIBILITY_PRESET hidden" in text
    # CMake-quoted: the definition keeps its quotes; ggml's definitions apply to code using its headers.
    assert '"X_VERSION=\\"1.0\\"" "GGML_MAX_NAME=128"' in text
    assert d.exports_map(["x_*", "y_init"]) == "{\n  global:\n    x_*;\n    y_init;\n  local:\n    *;\n};\n"
    with pytest.raises(SystemExit, match="matches no file"):
        d.upstream_project(argparse.Namespace(**{**vars(a), "upstream_source": ["nope/*.c"]}), str(tmp_path), "/g")
    with pytest.raises(SystemExit, match="--export"):
        d.exports_map([])
    with pytest.raises(SystemExit, match="--ggml-define"):
        d.upstream_project(argparse.Namespace(**{**vars(a), "ggml_define": ["-O0"]}), str(tmp_path), "/g")


def test_localai_engine_macro_forwards_ggml_defines(rule_runner):
    macros = (Path(__file__).parent.parent / "macros.py").read_text()
    rule_runner.write_files({
        "prelude.py": macros,
        "engines/x/BUILD": 'localai_engine(library="libx.so", header="x.h", ggml_archive="3rdparty/native:ggml", '
                           'ggml_defines=["GGML_MAX_NAME=128"], upstream_subdir="x", upstream_sources=["a.cpp"], '
                           'exports=["x_*"], fuzz=False)',
    })
    rule_runner.set_options(["--build-file-prelude-globs=prelude.py"])
    for level in CPU_LEVELS:
        fs = NativeEngineFieldSet.create(rule_runner.get_target(Address("engines/x", target_name=level)))
        assert fs.ggml_defines.value == ("GGML_MAX_NAME=128",) and fs.upstream().subdir == "x"


def test_driver_extra_cmake_options_cannot_override_fixed_ones():
    d = _driver()
    assert d.extra_options(["B=1", "A=x=y"], _level("avx2")) == {"A": "x=y", "B": "1"}
    for bad in ("GGML_AVX2=OFF", "GGML_NATIVE=ON", "CMAKE_C_FLAGS=-O0", "novalue"):
        with pytest.raises(SystemExit):
            d.extra_options([bad], _level("avx2"))


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


def test_driver_configures_upstream_templates_like_cmake_configure_file(tmp_path):
    d = _driver()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "v.h.in").write_text('#define V "@X_VERSION@"\n#define C "@X_COMMIT@"\n')
    d.configure_files(str(tmp_path), ["src/v.h.in"], ["X_VERSION=1.0-dev", "X_COMMIT=abc"])
    assert (tmp_path / "src" / "v.h").read_text() == '#define V "1.0-dev"\n#define C "abc"\n'
    with pytest.raises(SystemExit, match=r"no value for \['X_COMMIT'\]"):
        d.configure_files(str(tmp_path), ["src/v.h.in"], ["X_VERSION=1"])
    with pytest.raises(SystemExit, match="no such file"):
        d.configure_files(str(tmp_path), ["src/missing.h.in"], [])
    with pytest.raises(SystemExit, match="NAME=VALUE"):
        d.configure_files(str(tmp_path), ["src/v.h.in"], ["=1"])


def test_third_party_engine_configure_fields_reach_the_objects_step(rule_runner):
    rule_runner.write_files({"engines/x/BUILD": UPSTREAM_BUILD.replace(
        'exports=["x_*"],', 'exports=["x_*"], upstream_configure_files=["src/v.h.in"], '
                           'upstream_configure_vars={"X_VERSION": "1.0", "A": "b"},')})
    spec = NativeEngineFieldSet.create(rule_runner.get_target(Address("engines/x", target_name="avx2"))).upstream()
    argv = spec.objects_argv("a.tar.gz")
    assert argv[argv.index("--upstream-configure") + 1] == "src/v.h.in"
    # Sorted: the objects step's cache key does not depend on the BUILD file's key order.
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--upstream-configure-var"] == ["A=b", "X_VERSION=1.0"]


def test_driver_unity_builds_only_the_listed_sources(tmp_path):
    import argparse

    d = _driver()
    (tmp_path / "src" / "models").mkdir(parents=True)
    for f in ("src/a.cpp", "src/models/m1.cpp", "src/models/m2.cpp"):
        (tmp_path / f).write_text("")
    a = argparse.Namespace(upstream_source=["src/*.cpp", "src/models/*.cpp"], upstream_subdir="x", upstream_include=[],
                           upstream_define=[], ggml_define=[], upstream_unity=["src/models/*.cpp"])
    text = d.upstream_project(a, str(tmp_path), "/g/include")
    assert "UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16" in text
    assert 'set_source_files_properties("src/a.cpp" PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)' in text
    assert "UNITY" not in d.upstream_project(argparse.Namespace(**{**vars(a), "upstream_unity": []}), str(tmp_path), "/g")
    with pytest.raises(SystemExit, match="not among"):
        d.upstream_project(argparse.Namespace(**{**vars(a), "upstream_source": ["src/*.cpp"]}), str(tmp_path), "/g")
