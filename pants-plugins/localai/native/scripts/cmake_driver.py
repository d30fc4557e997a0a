"""Hermetic CMake driver, run inside a Pants sandbox by the native-toolchain venv's Python.

Not imported by the plugin: the rules copy this file into the sandbox and run it with the
interpreter of the `native-toolchain` resolve (ziglang, cmake, ninja from PyPI), so every tool
comes from the lockfile and none from the host. It can also be run by hand from a venv with the
same three packages, which is how the engine is developed outside Pants.

  python cmake_driver.py ggml   --sdist X.tar.gz --cpu-levels backends/common/cpu_levels.json --cpu-level avx2 \
      --out ggml-avx2
  python cmake_driver.py engine --src engines/minilm --ggml ggml-avx2 --cpu-levels ... --cpu-level avx2 --out out
  python cmake_driver.py ggml   --sdist pywhispercpp-1.5.1.tar.gz --ggml-subdir whisper.cpp/ggml ...
  python cmake_driver.py objects --upstream-archive pywhispercpp-1.5.1.tar.gz --upstream-subdir whisper.cpp \
      --ggml-subdir whisper.cpp/ggml --upstream-source src/whisper.cpp --upstream-include include \
      --upstream-include src --header include/whisper.h --out objects
  python cmake_driver.py engine --objects objects --export 'whisper_*' --library libwhisper.so --ggml ggml-avx2 ...

--cpu-levels is the CPU level table (backends/common/cpu_levels.json, the one the runtime reads
too): a level's ggml ISA options and the CPU flags its library needs, recorded in ggml-build.json.

A third-party engine has no CMake project of its own. `objects` extracts the subtree from the
pinned archive and compiles the listed sources once into libupstream.a with a generated CMake
project (ggml's headers come from the archive: the upstream code only calls ggml's API, so its
objects do not depend on the CPU level, and a level only changes ggml). `engine --objects` then
links that archive (whole) per CPU level against the level's static ggml into the shared library,
exporting only the --export globs (a generated version script).

--ggml-define (ggml_defines) is a preprocessor definition for ggml and for every source compiled
against ggml's headers (e.g. GGML_MAX_NAME=128, which changes struct ggml_tensor's layout).

Hermeticity: CMAKE_C/CXX_COMPILER, CMAKE_AR and CMAKE_RANLIB are wrapper scripts around
`python -m ziglang cc|c++|ar|ranlib -target <zig_target>`, the target of the level's platform in
the table's `platforms` (x86_64-linux-gnu.2.28, aarch64-linux-gnu.2.28: one glibc floor); a
platform other than x86_64 also gets CMAKE_SYSTEM_NAME/CMAKE_SYSTEM_PROCESSOR, so ggml takes its
ARM branch (GGML_CPU_ARM_ARCH, given in zig's -mcpu spelling: zig_arm_cpu). PATH holds only the
wrapper directory, cmake's and ninja's bin directories; CMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF so
CMake finds no host ld/strip/git. Reproducibility: -ffile-prefix-map for every absolute
directory, static ggml, `-s` at link (set by the engine's CMakeLists.txt).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

GGML_PREFIX_IN_SDIST = "vendor/llama.cpp/ggml"



def load_table(table_path: str) -> dict:
    with open(table_path) as f:
        return json.load(f)


class Platform:
    """A platform of the CPU level table: its zig target and CMake's system processor."""

    def __init__(self, table_path: str, name: str):
        platforms = load_table(table_path)["platforms"]
        if name not in platforms:
            raise SystemExit(f"--platform {name}: not a platform of {table_path} ({', '.join(platforms)})")
        spec = platforms[name]
        self.name = name
        self.zig_target = spec["zig_target"]
        self.system_processor = spec["cmake_system_processor"]
        self.levels = tuple(spec["levels"])

    @property
    def cross(self) -> bool:
        """Built for another architecture than x86_64 (the build machine's): CMake is told so."""
        return self.name != "x86_64"

    def cmake_args(self) -> list:
        if not self.cross:  # today's x86_64 builds keep their exact CMake command line
            return []
        return ["-DCMAKE_SYSTEM_NAME=Linux", f"-DCMAKE_SYSTEM_PROCESSOR={self.system_processor}"]

    @classmethod
    def of_level(cls, table_path: str, level: str) -> "Platform":
        owners = [p for p, spec in load_table(table_path)["platforms"].items() if level in spec["levels"]]
        if len(owners) != 1:
            raise SystemExit(f"{table_path}: level {level} is listed by {len(owners)} platforms (expected one)")
        return cls(table_path, owners[0])


def arm_march(table: dict, features) -> str:
    """The -march ggml's CMake gives an ARM CPU variant with these features (ggml-cpu/CMakeLists.txt,
    GGML_CPU_ALL_VARIANTS branch): the baseline, bumped to the newest architecture a feature needs,
    plus each feature's +tag in ggml's order."""
    known = table["ggml_arm_features"]
    march = table["platforms"]["aarch64"]["march_baseline"]
    tags = ""
    for feature, spec in known.items():  # the table lists them in ggml's order
        if feature in features:
            march = max(march, spec["march"], key=_arch_version)
            tags += spec["tag"]
    return march + tags


# zig cc reads an aarch64 -march (as -mcpu) as `<CPU model>+<LLVM feature>...` and rejects ggml's
# GCC-style architecture names ("unknown CPU: 'armv8'"). ggml passes GGML_CPU_ARM_ARCH through as
# -march=..., so the driver hands ggml the same architecture in zig's spelling: armv8.N-a is
# LLVM's v8_Na feature on the generic CPU, and two of ggml's tags have other LLVM names.
# Every level of the table is compiled with the locked zig in native/zig_march_test.py.
ZIG_ARM_TAGS = {"dotprod": "+dotprod", "fp16": "+fullfp16", "sve": "+sve", "i8mm": "+i8mm", "sve2": "+sve2",
                "sme": "+sme", "nosve": "-sve"}


def zig_arm_cpu(march: str) -> str:
    """ggml's -march for an ARM variant -> zig's -mcpu/-march value: armv8-a -> generic,
    armv8.2-a+dotprod+fp16 -> generic+v8_2a+dotprod+fullfp16."""
    arch, *tags = march.split("+")
    major, minor = _arch_version(arch)
    cpu = "generic" if (major, minor) == (8, 0) else f"generic+v{major}_{minor}a"
    unknown = [t for t in tags if t not in ZIG_ARM_TAGS]
    if unknown:
        raise SystemExit(f"-march={march}: no zig spelling for {['+' + t for t in unknown]} "
                         f"(add it to ZIG_ARM_TAGS in cmake_driver.py, checked with `python -m ziglang cc -mcpu=...`)")
    return cpu + "".join(ZIG_ARM_TAGS[t] for t in tags)


def _arch_version(march: str) -> tuple:
    """armv8-a -> (8, 0), armv8.6-a -> (8, 6)."""
    m = re.fullmatch(r"armv(\d+)(?:\.(\d+))?-a", march)
    if not m:
        raise SystemExit(f"not an ARM architecture name: {march!r}")
    return int(m.group(1)), int(m.group(2) or 0)


class CpuLevel:
    """One level of the CPU level table: its ggml options and the CPU flags they need."""

    def __init__(self, table_path: str, name: str):
        table = load_table(table_path)
        levels, options, arm = table["levels"], table["ggml_options"], table.get("ggml_arm_features", {})
        if name not in levels:
            raise SystemExit(f"--cpu-level {name}: not a level of {table_path} ({', '.join(levels)})")
        self.platform = Platform.of_level(table_path, name)
        known = arm if self.platform.name == "aarch64" else options
        unknown = [o for o in levels[name] if o not in known]
        if unknown:
            raise SystemExit(f"{table_path}: level {name} turns on {unknown}, which are not in "
                             f"{'ggml_arm_features' if known is arm else 'ggml_options'}")
        self.name = name
        self.arm_march = None
        if known is arm:
            # ggml's ARM path takes one -march (GGML_CPU_ARM_ARCH); the x86 ISA options are unused.
            self.isa_options = ("GGML_CPU_ARM_ARCH",)
            self.arm_march = arm_march(table, levels[name])  # ggml's name for it, recorded
            self.cmake_options = {"GGML_CPU_ARM_ARCH": zig_arm_cpu(self.arm_march)}
            self.cpu_flags = sorted({flag for o in levels[name] for flag in arm[o]["cpuinfo"]})
        else:
            self.isa_options = tuple(options)
            # ggml silently disables every ISA option when SOURCE_DATE_EPOCH is set: always pass them all.
            self.cmake_options = {o: "ON" if o in levels[name] else "OFF" for o in options}
            self.cpu_flags = sorted({flag for o in levels[name] for flag in options[o]})


# Same for every CPU level. GGML_LLAMAFILE: llamafile's tiled sgemm for f32/f16/q8_0 matmuls, as
# llama.cpp builds ggml (off by default for a ggml subproject); measured in engines/minilm/README.md.
GGML_COMMON = {"GGML_NATIVE": "OFF", "GGML_OPENMP": "OFF", "GGML_BACKEND_DL": "OFF", "GGML_CCACHE": "OFF",
               "GGML_BUILD_TESTS": "OFF", "GGML_BUILD_EXAMPLES": "OFF", "GGML_CPU_ALL_VARIANTS": "OFF",
               "GGML_LLAMAFILE": "ON"}


def _run(argv, env, cwd=None):
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, env=env, cwd=cwd, check=True)


def toolchain(workdir: str, platform: Platform):
    """Writes compiler wrappers for the platform's zig target; returns (env, cmake, ninja, wrapper dir)."""
    import cmake  # from the native-toolchain resolve
    import ninja

    wrappers = os.path.join(workdir, "toolchain-bin")
    os.makedirs(wrappers, exist_ok=True)
    tools = {
        "cc": f'-m ziglang cc -target {platform.zig_target}',
        "c++": f'-m ziglang c++ -target {platform.zig_target}',
        "ar": "-m ziglang ar",
        "ranlib": "-m ziglang ranlib",
    }
    for name, args in tools.items():
        path = os.path.join(wrappers, "zig-" + name)
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\nexec "{sys.executable}" {args} "$@"\n')
        os.chmod(path, 0o755)
    cmake_bin = getattr(cmake, "CMAKE_BIN_DIR", None) or os.path.join(os.path.dirname(cmake.__file__), "data", "bin")
    ninja_bin = ninja.BIN_DIR
    env = {
        "PATH": os.pathsep.join([wrappers, cmake_bin, ninja_bin]),
        "ZIG_GLOBAL_CACHE_DIR": os.path.abspath(os.environ.get("ZIG_GLOBAL_CACHE_DIR") or os.path.join(workdir, ".zig-cache")),
        "ZIG_LOCAL_CACHE_DIR": os.path.abspath(os.path.join(workdir, ".zig-local-cache")),
        "HOME": os.path.abspath(workdir),
        "LC_ALL": "C",
        "TZ": "UTC",
        "SOURCE_DATE_EPOCH": "0",
    }
    return env, os.path.join(cmake_bin, "cmake"), os.path.join(ninja_bin, "ninja"), wrappers


# libFuzzer's coverage hooks, left undefined in the library (zig's -fsanitize=fuzzer-no-link would
# link zig's own stubs for them, shadowing the fuzzer's): see engines/minilm/fuzz/fuzz_abi.py.
SANITIZER_COVERAGE = "-fsanitize-coverage=inline-8bit-counters,pc-table,trace-cmp"


def cmake_common(wrappers, ninja, prefix_maps, level: CpuLevel | None, sanitizer_coverage=False, *,
                 platform: Platform | None = None):
    """level=None: a project that compiles no ggml (upstream objects) gets no ISA options, and names
    its platform; otherwise the platform is the level's."""
    platform = platform or level.platform
    flags = " ".join(f"-ffile-prefix-map={src}={dst}" for src, dst in prefix_maps)
    extra = []
    if sanitizer_coverage:
        flags += " " + SANITIZER_COVERAGE
        # The hooks resolve only at run time, so CMake's compiler checks must not link an
        # executable (and an instrumented build should build no executables: see --artifact).
        extra = ["-DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY"]
    args = [
        "-G", "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={ninja}",
        f"-DCMAKE_C_COMPILER={wrappers}/zig-cc",
        f"-DCMAKE_CXX_COMPILER={wrappers}/zig-c++",
        f"-DCMAKE_AR={wrappers}/zig-ar",
        f"-DCMAKE_RANLIB={wrappers}/zig-ranlib",
        "-DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DCMAKE_C_FLAGS={flags}",
        f"-DCMAKE_CXX_FLAGS={flags}",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
        *platform.cmake_args(),
    ]
    if level is not None:
        args += [f"-D{k}={v}" for k, v in level.cmake_options.items()]
    return args + extra


def extract_subdir(sdist: str, subdir: str, dest: str) -> str:
    """Extracts `<top>/<subdir>/` of the archive (top = the sdist's own top directory) into dest;
    returns the extracted directory's absolute path."""
    prefix = subdir.strip("/") + "/"
    with tarfile.open(sdist) as tf:
        members = [m for m in tf.getmembers()
                   if (m.isfile() or m.isdir()) and m.name.partition("/")[2].startswith(prefix)]
        if not members:
            raise SystemExit(f"{sdist}: no {prefix} below its top directory: check ggml_subdir/upstream_subdir")
        for m in members:
            if m.name.startswith("/") or ".." in m.name.split("/"):
                raise SystemExit(f"{sdist}: unsafe member path {m.name}")
        root = members[0].name.partition("/")[0] + "/" + prefix
        tf.extractall(dest, members=members)
    return os.path.abspath(os.path.join(dest, root))


def extract_ggml(sdist: str, dest: str, subdir: str = GGML_PREFIX_IN_SDIST) -> str:
    return extract_subdir(sdist, subdir, dest)


def extra_options(pairs, level: CpuLevel | None) -> dict:
    """--cmake-option KEY=VALUE (repeatable) -> {KEY: VALUE}; the fixed options cannot be overridden."""
    opts = {}
    for p in pairs or ():
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise SystemExit(f"--cmake-option {p!r}: expected KEY=VALUE")
        if (level and key in level.isa_options) or key in GGML_COMMON or key.startswith("CMAKE_"):
            raise SystemExit(f"--cmake-option {key}: set by the driver (ISA/hermetic option), not overridable")
        opts[key] = value
    return dict(sorted(opts.items()))


def ggml_version(ggml_src: str) -> str:
    text = open(os.path.join(ggml_src, "CMakeLists.txt")).read()
    parts = [re.search(rf"set\(GGML_VERSION_{p} (\d+)\)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


# What each --part of `ggml` builds (ninja targets; None: all). ggml-base (tensors, quants'
# reference code, gguf, the backend API) and ggml (the backend registry) compile without any ISA
# flag, so they are the same for every CPU level of a platform: built once per platform, beside
# the ggml-cpu of each level. CMAKE_OPTIMIZE_DEPENDENCIES keeps ggml-cpu's build from building
# the ggml-base it links.
GGML_PART_TARGETS = {"all": None, "base": ("ggml-base", "ggml"), "cpu": ("ggml-cpu",)}


def build_ggml(a):
    work = os.path.abspath(".native-work")
    level = None if a.part == "base" else CpuLevel(a.cpu_levels, a.cpu_level)
    platform = level.platform if level else Platform(a.cpu_levels, a.platform)
    env, cmake, ninja, wrappers = toolchain(work, platform)
    src = extract_ggml(a.sdist, os.path.join(work, "src"), a.ggml_subdir)
    extra = extra_options(a.cmake_option, level)
    defines = checked_defines(a.ggml_define)
    build = os.path.join(work, "build")
    # The sdist ships ggml without ggml.pc.in, which standalone mode needs: build it as a
    # subproject of a two-line wrapper instead (the way llama.cpp itself builds it).
    wrap = os.path.join(work, "wrap")
    os.makedirs(wrap)
    with open(os.path.join(wrap, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.14...3.28)\nproject(ggml_wrap C CXX ASM)\n"
                + (f"add_compile_definitions({_cmake_list(defines)})\n" if defines else "")
                + f'add_subdirectory("{src}" ggml)\n')
    maps = [(src, "ggml"), (build, "build"), (wrap, "."), (work, ".")]
    _run([cmake, "-S", wrap, "-B", build, *cmake_common(wrappers, ninja, maps, level, a.sanitizer_coverage, platform=platform),
          *(f"-D{k}={v}" for k, v in GGML_COMMON.items()), *(f"-D{k}={v}" for k, v in extra.items()),
          "-DCMAKE_OPTIMIZE_DEPENDENCIES=ON"], env)
    targets = GGML_PART_TARGETS[a.part]
    _run([cmake, "--build", build, "-j", str(a.jobs), *(("--target", *targets) if targets else ())], env)
    out = os.path.abspath(a.out)
    os.makedirs(os.path.join(out, "lib"), exist_ok=True)
    for root, _, files in os.walk(build):
        for f in sorted(files):
            if f.endswith(".a"):
                shutil.copy2(os.path.join(root, f), os.path.join(out, "lib", f))
    shutil.copytree(os.path.join(src, "include"), os.path.join(out, "include"))
    if level:  # a base build is recorded by the level builds it goes into
        with open(os.path.join(out, "ggml-build.json"), "w") as f:
            json.dump({"ggml_version": ggml_version(src), "cpu_level": level.name, "cpu_flags": level.cpu_flags,
                       "cmake_options": {**GGML_COMMON, **level.cmake_options, **extra}, "zig_target": platform.zig_target, "platform": platform.name,
                       "defines": defines, "sanitizer_coverage": a.sanitizer_coverage,
                       **({"ggml_arm_march": level.arm_march} if level.arm_march else {})}, f, indent=2, sort_keys=True)
    shutil.rmtree(work)


def _cmake_list(items):
    return " ".join('"' + i.replace("\\", "/").replace('"', '\\"') + '"' for i in items)


def checked_defines(defines) -> list:
    """--ggml-define NAME[=VALUE] values, in the order given (they are part of the cache keys)."""
    for d in defines or ():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(=.*)?", d):
            raise SystemExit(f"--ggml-define {d!r}: expected NAME or NAME=VALUE (a preprocessor definition)")
    return list(defines or ())


def upstream_project(a, upstream: str, ggml_include: str) -> str:
    """CMakeLists.txt compiling a third-party engine's listed sources once into libupstream.a
    (position-independent, hidden visibility: the engine step's version script decides exports)."""
    import glob

    def matches(pattern, flag):
        found = sorted(os.path.relpath(p, upstream) for p in glob.glob(os.path.join(upstream, pattern), recursive=True)
                       if os.path.isfile(p))
        if not found:
            raise SystemExit(f"{flag} {pattern}: matches no file under {a.upstream_subdir}/ of the archive")
        return found

    sources = []
    for pattern in a.upstream_source:
        sources += [f for f in matches(pattern, "--upstream-source") if f not in sources]
    unity = []
    for pattern in getattr(a, "upstream_unity", None) or ():
        unity += [f for f in matches(pattern, "--upstream-unity") if f not in unity]
    outside = [f for f in unity if f not in sources]
    if outside:
        raise SystemExit(f"--upstream-unity: {outside[:3]} are not among the --upstream-source files")
    # Upstream's own unity batching (llama.cpp: UNITY_BUILD_BATCH_SIZE 16); the rest file by file.
    unity_block = (f"set_target_properties(upstream PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)\n"
                   f"set_source_files_properties({_cmake_list([f for f in sources if f not in unity])} "
                   f"PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)\n") if unity else ""
    defines = [*a.upstream_define, *checked_defines(a.ggml_define)]
    return f"""# Generated by cmake_driver.py for a third-party engine (do not edit).
cmake_minimum_required(VERSION 3.20)
project(localai_upstream_objects C CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_C_STANDARD 11)
set(CMAKE_C_VISIBILITY_PRESET hidden)
set(CMAKE_CXX_VISIBILITY_PRESET hidden)
set(CMAKE_VISIBILITY_INLINES_HIDDEN ON)
add_library(upstream STATIC {_cmake_list(sources)})
target_include_directories(upstream PRIVATE {_cmake_list(a.upstream_include)} "{ggml_include}")
target_compile_definitions(upstream PRIVATE {_cmake_list(defines)})
target_compile_options(upstream PRIVATE -O2)
{unity_block}"""


def configure_files(upstream: str, templates, pairs) -> None:
    """CMake's configure_file(@ONLY) for templates upstream's own CMake project generates (e.g.
    llama.cpp's src/llama-version.h.in): each written next to itself without `.in`."""
    values = {}
    for p in pairs or ():
        key, sep, value = p.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise SystemExit(f"--upstream-configure-var {p!r}: expected NAME=VALUE")
        values[key] = value
    for t in templates or ():
        if not t.endswith(".in"):
            raise SystemExit(f"--upstream-configure {t}: expected a template ending in .in")
        path = os.path.join(upstream, t)
        if not os.path.isfile(path):
            raise SystemExit(f"--upstream-configure {t}: no such file under the upstream directory")
        text = open(path).read()
        missing = sorted(set(re.findall(r"@([A-Za-z_][A-Za-z0-9_]*)@", text)) - set(values))
        if missing:
            raise SystemExit(f"--upstream-configure {t}: no value for {missing} (set upstream_configure_vars)")
        with open(path[:-3], "w") as f:
            f.write(re.sub(r"@([A-Za-z_][A-Za-z0-9_]*)@", lambda m: values[m.group(1)], text))


def exports_map(exports) -> str:
    if not exports:
        raise SystemExit("a third-party engine needs --export globs (the C API it exports)")
    return "{\n  global:\n" + "".join(f"    {g};\n" for g in exports) + "  local:\n    *;\n};\n"


OBJECTS_LIB = "libupstream.a"


def build_objects(a):
    """Compiles a third-party engine's sources once (no CPU level) into --out/libupstream.a, with
    its public header next to it."""
    work = os.path.abspath(".native-work-objects")
    platform = Platform(a.cpu_levels, a.platform)
    env, cmake, ninja, wrappers = toolchain(work, platform)
    src = extract_subdir(a.upstream_archive, a.upstream_subdir, os.path.join(work, "upstream"))
    ggml_include = os.path.join(extract_subdir(a.upstream_archive, a.ggml_subdir, os.path.join(work, "ggml")), "include")
    if any(c.isspace() for c in work):
        raise SystemExit(f"the build directory {work!r} contains whitespace: run from a directory without spaces")
    configure_files(src, a.upstream_configure, a.upstream_configure_var)
    with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
        f.write(upstream_project(a, src, ggml_include))
    build = os.path.join(work, "build")
    maps = [(src, "."), (os.path.dirname(ggml_include), "ggml"), (build, "build"), (work, ".")]
    _run([cmake, "-S", src, "-B", build, *cmake_common(wrappers, ninja, maps, None, a.sanitizer_coverage, platform=platform),
          *(f"-D{k}={v}" for k, v in extra_options(a.cmake_option, None).items())], env)
    _run([cmake, "--build", build, "-j", str(a.jobs)], env)
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    shutil.copy2(os.path.join(build, OBJECTS_LIB), os.path.join(out, OBJECTS_LIB))
    if a.header:
        shutil.copy2(os.path.join(src, a.header), os.path.join(out, os.path.basename(a.header)))
    shutil.rmtree(work)


def link_upstream(a, env, wrappers, work):
    """Links --objects/libupstream.a (every object) with the level's static ggml into --library."""
    if not (a.library.startswith("lib") and a.library.endswith(".so")):
        raise SystemExit(f"--library {a.library}: expected lib<name>.so")
    version_script = os.path.join(work, "localai-exports.map")
    with open(version_script, "w") as f:
        f.write(exports_map(a.export))
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    ggml_lib = os.path.join(os.path.abspath(a.ggml), "lib")
    _run([os.path.join(wrappers, "zig-c++"), "-shared", "-fPIC", "-o", os.path.join(out, a.library),
          f"-Wl,-soname,{a.library}",
          "-Wl,--whole-archive", os.path.join(os.path.abspath(a.objects), OBJECTS_LIB), "-Wl,--no-whole-archive",
          "-Wl,--start-group", *(os.path.join(ggml_lib, n) for n in ("libggml.a", "libggml-cpu.a", "libggml-base.a")),
          "-Wl,--end-group", "-lpthread", "-lm",
          "-s", f"-Wl,--version-script={version_script}", "-Wl,--build-id=none"], env, cwd=work)
    for f in sorted(os.listdir(os.path.abspath(a.objects))):
        if f != OBJECTS_LIB:  # the public header
            shutil.copy2(os.path.join(os.path.abspath(a.objects), f), os.path.join(out, f))


def build_engine(a):
    work = os.path.abspath(".native-work-engine")
    level = CpuLevel(a.cpu_levels, a.cpu_level)
    env, cmake, ninja, wrappers = toolchain(work, level.platform)
    if a.objects:
        link_upstream(a, env, wrappers, work)
        shutil.rmtree(work)
        return
    # Build from copies under the work directory: CMAKE_<LANG>_FLAGS is split on whitespace, so a
    # source or ggml path with a space would break -ffile-prefix-map (and the compiler check).
    src, ggml = os.path.join(work, "src"), os.path.join(work, "ggml")
    shutil.copytree(os.path.abspath(a.src), src)
    shutil.copytree(os.path.abspath(a.ggml), ggml)
    if any(c.isspace() for c in work):
        raise SystemExit(f"the build directory {work!r} contains whitespace: run from a directory without spaces")
    build = os.path.join(work, "build")
    maps = [(src, "."), (ggml, "ggml"), (build, "build"), (work, ".")]
    _run([cmake, "-S", src, "-B", build, *cmake_common(wrappers, ninja, maps, level, a.sanitizer_coverage),
          f"-DGGML_PREFIX={ggml}", f"-DENGINE_CPU_LEVEL={level.name}",
          *(f"-D{k}={v}" for k, v in extra_options(a.cmake_option, level).items())], env)
    # Build only what is copied out (ninja takes output files as targets).
    _run([cmake, "--build", build, "-j", str(a.jobs), "--target", *a.artifact], env)
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    for name in a.artifact:
        shutil.copy2(os.path.join(build, name), os.path.join(out, os.path.basename(name)))
    shutil.rmtree(work)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("ggml")
    g.add_argument("--sdist", required=True)
    g.add_argument("--part", choices=tuple(GGML_PART_TARGETS), default="all",
                   help="all: ggml's three static libraries for --cpu-level; base: libggml-base.a and libggml.a, "
                        "the same at every CPU level, for --platform; cpu: libggml-cpu.a alone, for --cpu-level")
    o = sub.add_parser("objects", help="compile a third-party engine's sources once (no CPU level)")
    o.add_argument("--upstream-archive", required=True, help="the pinned archive holding its sources")
    o.add_argument("--upstream-subdir", required=True, help="the engine's directory below the archive's top one")
    o.add_argument("--upstream-source", action="append", required=True, help="glob under --upstream-subdir")
    o.add_argument("--upstream-include", action="append", default=[])
    o.add_argument("--upstream-define", action="append", default=[])
    o.add_argument("--upstream-unity", action="append", default=[], help="glob of sources compiled as a unity build")
    o.add_argument("--upstream-configure", action="append", default=[], help="a .in template to configure (@VAR@)")
    o.add_argument("--upstream-configure-var", action="append", default=[], help="NAME=VALUE for the templates")
    o.add_argument("--header", help="public header under --upstream-subdir, copied to --out")
    o.add_argument("--cpu-levels", required=True, help="the CPU level table (backends/common/cpu_levels.json)")
    for s in (g, o):
        s.add_argument("--platform", default="x86_64", help="a platform of --cpu-levels (its zig target)")
        s.add_argument("--ggml-subdir", default=GGML_PREFIX_IN_SDIST, help="ggml's directory below the archive's top one")
        s.add_argument("--ggml-define", action="append", default=[], help="NAME[=VALUE] for ggml and code using its headers")
    e = sub.add_parser("engine")
    e.add_argument("--src", help="the engine's own CMake project (or --objects)")
    e.add_argument("--objects", help="a third-party engine: the `objects` step's output, linked into --library")
    e.add_argument("--export", action="append", default=[], help="symbol glob the library exports (with --objects)")
    e.add_argument("--library", help="lib<name>.so (with --objects)")
    e.add_argument("--ggml", required=True)
    e.add_argument("--artifact", action="append", default=[], help="path in the build dir to build and copy out (--src)")
    g.add_argument("--cpu-levels", required=True, help="the CPU level table (backends/common/cpu_levels.json)")
    g.add_argument("--cpu-level", help="a level of --cpu-levels (every --part but base)")
    e.add_argument("--cpu-levels", required=True, help="the CPU level table (backends/common/cpu_levels.json)")
    e.add_argument("--cpu-level", required=True, help="a level of --cpu-levels")
    for s in (g, o, e):
        s.add_argument("--out", required=True)
        s.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
        s.add_argument("--sanitizer-coverage", action="store_true", help="instrument for libFuzzer (fuzzing builds)")
        s.add_argument("--cmake-option", action="append", default=[], help="extra KEY=VALUE for CMake")
    a = p.parse_args()
    if a.cmd == "ggml" and (a.part == "base") == bool(a.cpu_level):
        p.error("ggml: --part base takes --platform; every other part takes --cpu-level")
    if a.cmd == "engine" and bool(a.src) == bool(a.objects):
        p.error("engine: give exactly one of --src and --objects")
    if a.cmd == "engine" and a.src and not a.artifact:
        p.error("engine --src needs --artifact")
    if a.cmd == "engine" and a.objects and not (a.library and a.export):
        p.error("engine --objects needs --library and --export")
    {"ggml": build_ggml, "objects": build_objects, "engine": build_engine}[a.cmd](a)


if __name__ == "__main__":
    main()
