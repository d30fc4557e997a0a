"""Target types for native engines.

  native_engine(
      name="avx2",
      cpu_level="avx2",                         # a level of backends/common/cpu_levels.json
      ggml_archive="3rdparty/native:llama-cpp-python-sdist",
      library="libminilm.so",
      header="include/minilm.h",
  )

`pants package engines/minilm:avx2` writes dist/engines/minilm/avx2/{libminilm.so, minilm.h,
build-record.json}. ggml is compiled by its own cached processes (ggml-base per archive and platform,
ggml-cpu per archive and CPU level), so
editing engine sources only re-runs the engine's CMake build.
"""
from __future__ import annotations

from pants.core.goals.package import OutputPathField
from pants.core.util_rules.environments import EnvironmentField
from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    BoolField,
    DictStringToStringField,
    MultipleSourcesField,
    StringField,
    StringSequenceField,
    Target,
)
from pants.util.strutil import help_text

from localai.native.cpu_levels import CPU_LEVELS, TABLE_PATH


class CpuLevelField(StringField):
    alias = "cpu_level"
    required = True
    valid_choices = CPU_LEVELS
    help = help_text(
        f"""
        The x86-64 CPU level of this build, a level of {TABLE_PATH}: the ggml ISA options it
        compiles with (all passed explicitly, ON or OFF) and the CPU flags a machine needs to
        load the library, recorded in build-record.json.
        """
    )


class GgmlArchiveField(StringField):
    alias = "ggml_archive"
    required = True
    help = help_text(
        """
        Address of a `file` target whose source is a pinned archive containing ggml (an
        `http_source` with url, len and sha256), e.g. the llama_cpp_python sdist.
        """
    )


# ggml inside the llama_cpp_python sdist (native/scripts/cmake_driver.py, a standalone script, repeats it as its default).
DEFAULT_GGML_SUBDIR = "vendor/llama.cpp/ggml"


class GgmlSubdirField(StringField):
    alias = "ggml_subdir"
    default = DEFAULT_GGML_SUBDIR
    help = help_text(
        """
        Where ggml is inside `ggml_archive`, below the archive's top directory (e.g.
        `whisper.cpp/ggml` in the pywhispercpp sdist). Each archive's own vendored ggml is built.
        """
    )


class GgmlDefinesField(StringSequenceField):
    alias = "ggml_defines"
    default = ()
    help = help_text(
        """
        Preprocessor definitions (`NAME` or `NAME=VALUE`) for ggml and for every source compiled
        against ggml's headers, e.g. [\"GGML_MAX_NAME=128\"] for stable-diffusion.cpp (a compile
        definition that changes `struct ggml_tensor`, not a CMake option: both sides must agree).
        Part of the cache key of the ggml and objects steps.
        """
    )


class CMakeOptionsField(DictStringToStringField):
    alias = "cmake_options"
    help = help_text(
        """
        Extra `-D<key>=<value>` options for both CMake steps (ggml and the engine's own project, or
        the objects step of a third-party engine), on top of the fixed hermetic/ISA options. Part
        of the cache key of both steps.
        """
    )


class UpstreamSubdirField(StringField):
    alias = "upstream_subdir"
    default = None
    help = help_text(
        """
        Build a third-party engine: the library's sources are this directory of `ggml_archive`
        (below its top directory, e.g. `whisper.cpp`), not a CMake project in the target's
        directory. The engine step generates the CMake project from `upstream_sources`,
        `upstream_include_dirs`, `upstream_defines` and `exports`; `header` is then relative to
        this directory. Those sources are compiled once (one cached process for every CPU level:
        they only call ggml's API) and linked per level against that level's static ggml.
        """
    )


class UpstreamSourcesField(StringSequenceField):
    alias = "upstream_sources"
    default = ()
    help = "Files (globs) under `upstream_subdir` compiled into the library, e.g. [\"src/whisper.cpp\"]."


class UpstreamIncludeDirsField(StringSequenceField):
    alias = "upstream_include_dirs"
    default = ()
    help = "Include directories under `upstream_subdir` (ggml's headers are always on the path)."


class UpstreamDefinesField(StringSequenceField):
    alias = "upstream_defines"
    default = ()
    help = "Preprocessor definitions for the upstream sources, e.g. [\"WHISPER_SHARED\", 'WHISPER_VERSION=\"1.8.5\"']."


class UpstreamUnitySourcesField(StringSequenceField):
    alias = "upstream_unity_sources"
    default = ()
    help = help_text(
        """
        Globs among `upstream_sources` compiled as a CMake unity build, 16 files per translation
        unit, the way upstream's own CMake project builds them (e.g. llama.cpp's
        [\"src/models/*.cpp\"]: 157 small files sharing heavy headers). Everything else is compiled
        file by file. Saves most of the compile time of such a directory.
        """
    )


class UpstreamConfigureFilesField(StringSequenceField):
    alias = "upstream_configure_files"
    default = ()
    help = help_text(
        """
        Templates under `upstream_subdir` that upstream's own CMake project generates with
        `configure_file(... @ONLY)`, e.g. [\"src/llama-version.h.in\"]: the objects step writes each
        one without its `.in` suffix, next to it, replacing `@VAR@` with `upstream_configure_vars`
        (a variable left unset is an error).
        """
    )


class UpstreamConfigureVarsField(DictStringToStringField):
    alias = "upstream_configure_vars"
    help = "`@VAR@` values for `upstream_configure_files`, e.g. {\"LLAMA_VERSION\": \"0.5.0-dev\"}."


class ExportsField(StringSequenceField):
    alias = "exports"
    default = ()
    help = help_text(
        """
        Symbol globs the library exports (a linker version script is generated: `global:` these,
        `local: *`), e.g. [\"whisper_*\"]. Required with `upstream_subdir`; an engine with its own
        CMake project brings its own version script.
        """
    )


class NativeEngineSourcesField(MultipleSourcesField):
    default = ("CMakeLists.txt", "*.map", "include/**/*.h", "src/**/*", "tests/**/*.cpp", "tests/**/*.h")
    help = "The engine's CMake project: CMakeLists.txt at the target's directory and its sources."


class LibraryField(StringField):
    alias = "library"
    required = True
    help = "File name of the shared library the CMake project builds (e.g. libminilm.so)."


class HeaderField(StringField):
    alias = "header"
    required = True
    help = "The engine's public C header, relative to the target's directory."


class TestBinaryField(StringField):
    alias = "test_binary"
    default = None
    help = "Name of a test executable the CMake project builds; packaged only if include_test_binary."


class IncludeTestBinaryField(BoolField):
    alias = "include_test_binary"
    default = False
    help = "Also package `test_binary` (for test targets; the user-facing package leaves it out)."


class SanitizerCoverageField(BoolField):
    alias = "sanitizer_coverage"
    default = False
    help = help_text(
        """
        Build ggml and the engine with `-fsanitize-coverage=inline-8bit-counters,pc-table,trace-cmp`
        for coverage-guided fuzzing. The library then calls libFuzzer's `__sanitizer_cov_*` hooks,
        which the process must provide (the atheris harness preloads atheris' libFuzzer): not for
        shipping.
        """
    )


class NativeEngineTarget(Target):
    alias = "native_engine"
    core_fields = (
        *COMMON_TARGET_FIELDS,
        CpuLevelField,
        GgmlArchiveField,
        GgmlSubdirField,
        GgmlDefinesField,
        CMakeOptionsField,
        UpstreamSubdirField,
        UpstreamSourcesField,
        UpstreamIncludeDirsField,
        UpstreamDefinesField,
        UpstreamUnitySourcesField,
        UpstreamConfigureFilesField,
        UpstreamConfigureVarsField,
        ExportsField,
        NativeEngineSourcesField,
        LibraryField,
        HeaderField,
        TestBinaryField,
        IncludeTestBinaryField,
        SanitizerCoverageField,
        OutputPathField,
        EnvironmentField,
    )
    help = help_text(
        """
        A native engine (C++ on ggml with a flat C ABI) built for one CPU level with a
        hermetic toolchain (zig cc, cmake, ninja from the `native-toolchain` resolve).
        """
    )


def target_types():
    return [NativeEngineTarget]
