"""Rules: hermetic toolchain -> ggml (ggml-base once per archive x platform, ggml-cpu once per
archive x CPU level) -> engine (one process per engine x CPU level) -> package (library, header,
build-record.json).

A third-party engine (upstream_subdir) adds an `objects` step: its sources compiled once, for every
CPU level (they only call ggml's API; the ISA code is in ggml), into one cached archive that the
engine step links per level against that level's ggml. The upstream compile dominates (e.g.
stable-diffusion.cpp's ~5 CPU-minutes), so it is not repeated per level.

Every process runs `cmake_driver.py` with the Python of a VenvPex built from the
`native-toolchain` resolve (ziglang, cmake, ninja): no host compiler, linker or CMake is used.
zig's global cache (libc++/compiler-rt builds, not our objects) lives in the append-only named
cache `localai_zig`, so it survives between runs without entering any cache key. The CPU level
table (cpu_levels.py) is an input of every ggml and engine process.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.util_rules.pex import PexRequest, VenvPex, VenvPexProcess
from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact, OutputPathField, PackageFieldSet
from pants.core.target_types import FileSourceField
from pants.core.util_rules.environments import EnvironmentField
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.engine.addresses import Address, UnparsedAddressInputs
from pants.engine.fs import (
    AddPrefix,
    CreateDigest,
    Digest,
    DigestContents,
    DigestSubset,
    FileContent,
    MergeDigests,
    PathGlobs,
    RemovePrefix,
)
from pants.engine.process import ProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import HydratedSources, HydrateSourcesRequest, Targets
from pants.engine.unions import UnionRule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.folder import BUILD_RECORD
from localai.model.records import canonical_json
from localai.model.variant import lockfile_path
from localai.native.cpu_levels import TABLE_PATH, CpuLevelTable
from localai.native.target_types import (
    DEFAULT_GGML_SUBDIR,
    CMakeOptionsField,
    CpuLevelField,
    ExportsField,
    GgmlArchiveField,
    GgmlDefinesField,
    GgmlSubdirField,
    HeaderField,
    IncludeTestBinaryField,
    LibraryField,
    NativeEngineSourcesField,
    SanitizerCoverageField,
    TestBinaryField,
    UpstreamConfigureFilesField,
    UpstreamConfigureVarsField,
    UpstreamDefinesField,
    UpstreamIncludeDirsField,
    UpstreamSourcesField,
    UpstreamSubdirField,
    UpstreamUnitySourcesField,
)
from localai.scripts import script_file, script_venv_request

TOOLCHAIN_RESOLVE = "native-toolchain"
NATIVE_TOOLCHAIN_LOCK = lockfile_path(TOOLCHAIN_RESOLVE)
TOOLCHAIN_REQUIREMENTS = ("ziglang", "cmake", "ninja")  # versions pinned by the resolve's lockfile
DRIVER_PATH = "__localai_native/cmake_driver.py"
ZIG_CACHE_NAME = "localai_zig"
ZIG_CACHE_DIR = ".cache/zig"
GGML_OUT = "ggml-out"
OBJECTS_OUT = "objects-out"
ENGINE_OUT = "engine-out"


class NativeBuildError(LocalAIError):
    pass


@dataclass(frozen=True)
class NativeToolchain:
    venv_pex: VenvPex
    driver: Digest

    def process(self, *, argv, input_digest: Digest, description: str, output_directories) -> VenvPexProcess:
        return VenvPexProcess(
            self.venv_pex,
            argv=(DRIVER_PATH, *argv, "--jobs", "{pants_concurrency}"),
            input_digest=input_digest,
            description=description,
            level=LogLevel.INFO,
            extra_env={"ZIG_GLOBAL_CACHE_DIR": ZIG_CACHE_DIR},
            output_directories=tuple(output_directories),
            append_only_caches={ZIG_CACHE_NAME: ZIG_CACHE_DIR},
            concurrency_available=os.cpu_count() or 1,
            timeout_seconds=3600,
        )


@rule(desc="Set up the hermetic C/C++ toolchain (zig, cmake, ninja)", level=LogLevel.DEBUG)
async def native_toolchain(python_setup: PythonSetup) -> NativeToolchain:
    venv_pex, driver = await MultiGet(
        Get(
            VenvPex,
            PexRequest,
            script_venv_request(python_setup, TOOLCHAIN_RESOLVE, TOOLCHAIN_REQUIREMENTS, "native-toolchain.pex", "the localai native toolchain"),
        ),
        Get(Digest, CreateDigest([script_file("localai.native.scripts", "cmake_driver.py", DRIVER_PATH)])),
    )
    return NativeToolchain(venv_pex, driver)


@dataclass(frozen=True)
class GgmlSettings:
    """How an engine's ggml is built, shared by its three steps (ggml per CPU level, the
    third-party sources once, the engine per level): one ggml per (archive, level, settings)."""

    archive: Address  # a `file` target holding the pinned archive
    ggml_subdir: str = DEFAULT_GGML_SUBDIR
    cmake_options: tuple[tuple[str, str], ...] = ()
    ggml_defines: tuple[str, ...] = ()
    sanitizer_coverage: bool = False

    def coverage_args(self) -> tuple[str, ...]:
        return ("--sanitizer-coverage",) if self.sanitizer_coverage else ()

    def cmake_option_args(self) -> tuple[str, ...]:
        return tuple(a for k, v in self.cmake_options for a in ("--cmake-option", f"{k}={v}"))

    def ggml_args(self) -> tuple[str, ...]:
        """Where ggml is, how it is configured, and instrumentation: what ggml and code using its headers compile with."""
        defines = tuple(a for d in self.ggml_defines for a in ("--ggml-define", d))
        return ("--ggml-subdir", self.ggml_subdir, *self.cmake_option_args(), *defines, *self.coverage_args())


@dataclass(frozen=True)
class GgmlBuildRequest:
    settings: GgmlSettings
    cpu_level: str


def cpu_level_args(level: str) -> tuple[str, ...]:
    return ("--cpu-levels", TABLE_PATH, "--cpu-level", level)


@dataclass(frozen=True)
class ArchiveFile:
    digest: Digest
    path: str
    url: str = ""  # the http_source pin ("" for a file in the repository)
    sha256: str = ""

    def source_record(self, address: Address) -> dict:
        """Where an engine's sources come from, for its build record and the backends' SBOMs."""
        return {"archive": str(address), "url": self.url, "sha256": self.sha256}


@rule(desc="Fetch a pinned native archive", level=LogLevel.DEBUG)
async def archive_file(address: Address) -> ArchiveFile:
    targets = await Get(
        Targets,
        UnparsedAddressInputs([address.spec], owning_address=None, description_of_origin="ggml_archive"),
    )
    if len(targets) != 1 or not targets[0].has_field(FileSourceField):
        raise NativeBuildError(f"{address}: a native archive (ggml_archive, a converted model's archive) must be a `file` target with an http_source")
    # http_source is hydrated by codegen (download + sha256/len check): enable it.
    archive = await Get(
        HydratedSources,
        HydrateSourcesRequest(targets[0][FileSourceField], for_sources_types=(FileSourceField,), enable_codegen=True),
    )
    files = archive.snapshot.files
    if len(files) != 1:
        raise NativeBuildError(f"{address}: expected one archive file, got {files}")
    pin = targets[0][FileSourceField].value
    return ArchiveFile(archive.snapshot.digest, files[0], getattr(pin, "url", ""), getattr(pin, "sha256", ""))


@dataclass(frozen=True)
class GgmlBuild:
    digest: Digest  # ggml-out/{lib/*.a, include/*.h, ggml-build.json}
    version: str
    build_info: str  # ggml-build.json


@dataclass(frozen=True)
class GgmlBaseRequest:
    settings: GgmlSettings
    platform: str  # a platform of the CPU level table


@dataclass(frozen=True)
class GgmlBase:
    digest: Digest  # ggml-out/lib/{libggml-base.a, libggml.a}


@rule(desc="Build ggml's level-independent libraries", level=LogLevel.DEBUG)
async def build_ggml_base(request: GgmlBaseRequest, toolchain: NativeToolchain, table: CpuLevelTable) -> GgmlBase:
    settings = request.settings
    archive = await Get(ArchiveFile, Address, settings.archive)
    input_digest = await Get(Digest, MergeDigests([archive.digest, toolchain.driver, table.digest]))
    result = await Get(
        ProcessResult,
        VenvPexProcess,
        toolchain.process(
            argv=("ggml", "--part", "base", "--sdist", archive.path, "--cpu-levels", TABLE_PATH, "--platform", request.platform,
                  "--out", GGML_OUT, *settings.ggml_args()),
            input_digest=input_digest,
            description=f"Compile ggml-base ({request.platform}{', sanitizer coverage' if settings.sanitizer_coverage else ''}) "
                        f"from {archive.path} (once for every {request.platform} CPU level)",
            output_directories=(GGML_OUT,),
        ),
    )
    return GgmlBase(await Get(Digest, DigestSubset(result.output_digest, PathGlobs([f"{GGML_OUT}/lib/*.a"]))))


@rule(desc="Build ggml", level=LogLevel.DEBUG)
async def build_ggml(request: GgmlBuildRequest, toolchain: NativeToolchain, table: CpuLevelTable) -> GgmlBuild:
    """ggml for one CPU level: the level's ggml-cpu, beside the platform's shared ggml-base (the
    same bytes as one build of all three: engines/minilm/tests:reproducible builds them at once)."""
    settings = request.settings
    archive = await Get(ArchiveFile, Address, settings.archive)
    input_digest = await Get(Digest, MergeDigests([archive.digest, toolchain.driver, table.digest]))
    base, result = await MultiGet(  # the two compiles run side by side
        Get(GgmlBase, GgmlBaseRequest(settings, table.platform(request.cpu_level))),
        Get(
            ProcessResult,
            VenvPexProcess,
            toolchain.process(
                argv=("ggml", "--part", "cpu", "--sdist", archive.path, *cpu_level_args(request.cpu_level), "--out",
                      GGML_OUT, *settings.ggml_args()),
                input_digest=input_digest,
                description=f"Compile ggml-cpu ({request.cpu_level}{', sanitizer coverage' if settings.sanitizer_coverage else ''}) from {archive.path}",
                output_directories=(GGML_OUT,),
            ),
        ),
    )
    info = await Get(DigestContents, DigestSubset(result.output_digest, PathGlobs([f"{GGML_OUT}/ggml-build.json"])))
    build_info = info[0].content.decode()
    digest = await Get(Digest, MergeDigests([result.output_digest, base.digest]))
    return GgmlBuild(digest, json.loads(build_info)["ggml_version"], build_info)


@dataclass(frozen=True)
class NativeEngineBuildRequest:
    address: Address
    sources: NativeEngineSourcesField
    cpu_level: str
    artifacts: tuple[str, ...]
    settings: GgmlSettings
    upstream: UpstreamSpec | None = None


@dataclass(frozen=True)
class UpstreamSpec:
    """A third-party engine: sources from a subdirectory of the pinned archive (see the fields'
    help in target_types.py); the driver generates its CMake project and version script."""

    subdir: str
    sources: tuple[str, ...]
    include_dirs: tuple[str, ...]
    defines: tuple[str, ...]
    exports: tuple[str, ...]
    library: str
    header: str
    unity_sources: tuple[str, ...] = ()
    configure_files: tuple[str, ...] = ()
    configure_vars: tuple[tuple[str, str], ...] = ()

    def objects_argv(self, archive_path: str) -> list[str]:
        """The `objects` step's arguments: everything but the link (exports, library name)."""
        argv = ["--upstream-archive", archive_path, "--upstream-subdir", self.subdir, "--header", self.header]
        for flag, values in (("--upstream-source", self.sources), ("--upstream-include", self.include_dirs),
                             ("--upstream-define", self.defines), ("--upstream-unity", self.unity_sources),
                             ("--upstream-configure", self.configure_files),
                             ("--upstream-configure-var", tuple(f"{k}={v}" for k, v in self.configure_vars))):
            for v in values:
                argv += [flag, v]
        return argv

    def link_argv(self) -> list[str]:
        return ["--library", self.library, *(a for g in self.exports for a in ("--export", g))]


@dataclass(frozen=True)
class UpstreamObjectsRequest:
    settings: GgmlSettings
    spec: UpstreamSpec
    platform: str = "x86_64"  # a platform of the CPU level table: the objects' zig target


@dataclass(frozen=True)
class UpstreamObjects:
    digest: Digest  # objects-out/{libupstream.a, <header>}


@rule(desc="Compile a third-party engine's sources", level=LogLevel.DEBUG)
async def build_upstream_objects(
    request: UpstreamObjectsRequest, toolchain: NativeToolchain, table: CpuLevelTable
) -> UpstreamObjects:
    archive = await Get(ArchiveFile, Address, request.settings.archive)
    input_digest = await Get(Digest, MergeDigests([archive.digest, toolchain.driver, table.digest]))
    argv = ["objects", *request.spec.objects_argv(archive.path), "--cpu-levels", TABLE_PATH, "--platform", request.platform,
            *request.settings.ggml_args(), "--out", OBJECTS_OUT]
    result = await Get(
        ProcessResult,
        VenvPexProcess,
        toolchain.process(
            argv=argv,
            input_digest=input_digest,
            description=f"Compile {request.spec.subdir} from {archive.path} (once for every {request.platform} CPU level)",
            output_directories=(OBJECTS_OUT,),
        ),
    )
    return UpstreamObjects(result.output_digest)


@dataclass(frozen=True)
class NativeEngineBuild:
    digest: Digest  # the artifacts, at the digest root
    sources: Digest  # the engine's sources (repo-relative paths)
    ggml: GgmlBuild


@rule(desc="Build a native engine", level=LogLevel.DEBUG)
async def build_native_engine(
    request: NativeEngineBuildRequest, toolchain: NativeToolchain, table: CpuLevelTable
) -> NativeEngineBuild:
    ggml, sources = await MultiGet(
        Get(GgmlBuild, GgmlBuildRequest(settings=request.settings, cpu_level=request.cpu_level)),
        Get(SourceFiles, SourceFilesRequest([request.sources])),
    )
    src_dir = request.address.spec_path
    inputs = [sources.snapshot.digest, ggml.digest, toolchain.driver, table.digest]
    if request.upstream:
        objects = await Get(
            UpstreamObjects,
            UpstreamObjectsRequest(settings=request.settings, spec=request.upstream, platform=table.platform(request.cpu_level)),
        )
        inputs.append(objects.digest)
        where = ["--objects", OBJECTS_OUT, *request.upstream.link_argv()]
    else:
        if f"{src_dir}/CMakeLists.txt" not in sources.snapshot.files:
            raise NativeBuildError(
                f"{request.address}: no CMakeLists.txt in {src_dir}/ (the engine's CMake project); for a "
                "third-party engine from the archive set upstream_subdir, upstream_sources and exports instead"
            )
        where = ["--src", src_dir]
    input_digest = await Get(Digest, MergeDigests(inputs))
    argv = ["engine", *where, "--ggml", GGML_OUT, *cpu_level_args(request.cpu_level), "--out", ENGINE_OUT,
            *request.settings.cmake_option_args()]
    if not request.upstream:  # an upstream engine builds only its library
        for a in request.artifacts:
            argv += ["--artifact", a]
    argv += request.settings.coverage_args()
    result = await Get(
        ProcessResult,
        VenvPexProcess,
        toolchain.process(
            argv=argv,
            input_digest=input_digest,
            description=f"Build {request.address} ({request.cpu_level})",
            output_directories=(ENGINE_OUT,),
        ),
    )
    out = await Get(Digest, RemovePrefix(result.output_digest, ENGINE_OUT))
    return NativeEngineBuild(out, sources.snapshot.digest, ggml)


@dataclass(frozen=True)
class NativeEngineFieldSet(PackageFieldSet):
    required_fields = (CpuLevelField, GgmlArchiveField, LibraryField)

    cpu_level: CpuLevelField
    ggml_archive: GgmlArchiveField
    sources: NativeEngineSourcesField
    library: LibraryField
    header: HeaderField
    test_binary: TestBinaryField
    include_test_binary: IncludeTestBinaryField
    sanitizer_coverage: SanitizerCoverageField
    output_path: OutputPathField
    ggml_subdir: GgmlSubdirField
    ggml_defines: GgmlDefinesField
    cmake_options: CMakeOptionsField
    upstream_subdir: UpstreamSubdirField
    upstream_sources: UpstreamSourcesField
    upstream_include_dirs: UpstreamIncludeDirsField
    upstream_defines: UpstreamDefinesField
    upstream_unity_sources: UpstreamUnitySourcesField
    upstream_configure_files: UpstreamConfigureFilesField
    upstream_configure_vars: UpstreamConfigureVarsField
    exports: ExportsField
    # The engine builds in this environment (remote workers under pants.remote.toml).
    environment: EnvironmentField

    def upstream(self) -> UpstreamSpec | None:
        if not self.upstream_subdir.value:
            if self.upstream_sources.value or self.exports.value:
                raise NativeBuildError(
                    f"{self.address}: upstream_sources/exports are for a third-party engine: set upstream_subdir "
                    "(the engine's directory in ggml_archive) too"
                )
            return None
        if not self.upstream_sources.value or not self.exports.value:
            raise NativeBuildError(
                f"{self.address}: upstream_subdir={self.upstream_subdir.value!r} needs upstream_sources (files to "
                "compile) and exports (the C API symbol globs, e.g. [\"whisper_*\"])"
            )
        return UpstreamSpec(
            subdir=self.upstream_subdir.value,
            sources=tuple(self.upstream_sources.value),
            include_dirs=tuple(self.upstream_include_dirs.value or ()),
            defines=tuple(self.upstream_defines.value or ()),
            exports=tuple(self.exports.value),
            library=self.library.value,
            header=self.header.value,
            unity_sources=tuple(self.upstream_unity_sources.value or ()),
            configure_files=tuple(self.upstream_configure_files.value or ()),
            configure_vars=tuple(sorted((self.upstream_configure_vars.value or {}).items())),
        )


def engine_record_json(*, name: str, cpu_level: str, library: str, lib_sha256: str, header: str, ggml: GgmlBuild,
                      source: dict, upstream: dict | None = None) -> bytes:
    """The engine's build record; `cpu_flags` are the /proc/cpuinfo flags a machine needs to load
    the library (the driver derives them from the CPU level table along with the ISA options)."""
    info = json.loads(ggml.build_info)
    extra = {"upstream": upstream} if upstream else {}
    if "ggml_arm_march" in info:  # ggml's own -march name for an ARM level (the cmake option is zig's spelling)
        extra["ggml_arm_march"] = info["ggml_arm_march"]
    return canonical_json(
        {
            **extra,
            "name": name,
            "cpu_level": cpu_level,
            "cpu_flags": info["cpu_flags"],
            "library": library,
            "sha256": lib_sha256,
            "header": header,
            "source": source,  # ArchiveFile.source_record: the pinned archive compiled
            "ggml_version": ggml.version,
            "ggml_cmake_options": info.get("cmake_options", {}),
            "ggml_defines": info.get("defines", []),
            "sanitizer_coverage": info.get("sanitizer_coverage", False),
            "target": info.get("zig_target"),
            "platform": info.get("platform", "x86_64"),
        }
    )


async def _ggml_archive(field_set: NativeEngineFieldSet) -> tuple[Address, ArchiveFile]:
    """The pinned archive the engine's ggml (and an upstream engine's sources) come from."""
    address = field_set.address
    archive = await Get(
        Targets,
        UnparsedAddressInputs(
            [field_set.ggml_archive.value], owning_address=address, description_of_origin=f"the `ggml_archive` field of {address}"
        ),
    )
    return archive[0].address, await Get(ArchiveFile, Address, archive[0].address)


async def _engine_header(field_set: NativeEngineFieldSet, build: NativeEngineBuild) -> tuple[str, Digest]:
    """The engine's public header at the digest's root: the archive's, which the driver copied next
    to the library, for an upstream engine; the target's own source otherwise."""
    if field_set.upstream():
        header_path = os.path.basename(field_set.header.value)
        return header_path, await Get(Digest, DigestSubset(build.digest, PathGlobs([header_path])))
    header_path = f"{field_set.address.spec_path}/{field_set.header.value}"
    digest = await Get(Digest, DigestSubset(build.sources, PathGlobs([header_path])))
    return os.path.basename(header_path), await Get(Digest, RemovePrefix(digest, os.path.dirname(header_path)))


@rule(desc="Package a native engine", level=LogLevel.DEBUG)
async def package_native_engine(field_set: NativeEngineFieldSet, table: CpuLevelTable) -> BuiltPackage:
    address = field_set.address
    table.check(field_set.cpu_level.value, str(address))
    archive_address, source = await _ggml_archive(field_set)
    library = field_set.library.value
    test_binary = field_set.test_binary.value
    if field_set.include_test_binary.value and not test_binary:
        raise NativeBuildError(f"{address}: include_test_binary=True needs test_binary=<executable name>")
    # The build always produces the test binary (if any), so a package with and one without it
    # share the same cached process; only the packaged file list differs.
    built = (library, test_binary) if test_binary else (library,)
    artifacts = list(built) if field_set.include_test_binary.value else [library]
    upstream = field_set.upstream()
    build = await Get(
        NativeEngineBuild,
        NativeEngineBuildRequest(
            address=address,
            sources=field_set.sources,
            cpu_level=field_set.cpu_level.value,
            artifacts=built,
            settings=GgmlSettings(
                archive=archive_address,
                ggml_subdir=field_set.ggml_subdir.value,
                cmake_options=tuple(sorted((field_set.cmake_options.value or {}).items())),
                ggml_defines=tuple(field_set.ggml_defines.value or ()),
                sanitizer_coverage=field_set.sanitizer_coverage.value,
            ),
            upstream=upstream,
        ),
    )
    build_digest = await Get(Digest, DigestSubset(build.digest, PathGlobs(artifacts)))
    header_name, header_digest = await _engine_header(field_set, build)
    lib_contents = await Get(DigestContents, DigestSubset(build.digest, PathGlobs([library])))
    if not lib_contents:
        raise NativeBuildError(f"{address}: the CMake project built no {library}")
    record = engine_record_json(
        name=os.path.basename(address.spec_path),
        cpu_level=field_set.cpu_level.value,
        library=library,
        lib_sha256=hashlib.sha256(lib_contents[0].content).hexdigest(),
        header=header_name,
        ggml=build.ggml,
        source=source.source_record(archive_address),
        upstream=(
            {"subdir": upstream.subdir, "exports": list(upstream.exports), "defines": list(upstream.defines)}  # of `source`
            if upstream else None
        ),
    )
    meta = await Get(Digest, CreateDigest([FileContent(BUILD_RECORD, record)]))
    out_dir = field_set.output_path.value or f"{address.spec_path}/{address.target_name}"
    merged = await Get(Digest, MergeDigests([build_digest, header_digest, meta]))
    final = await Get(Digest, AddPrefix(merged, out_dir))
    names = [*artifacts, header_name, BUILD_RECORD]
    return BuiltPackage(final, tuple(BuiltPackageArtifact(f"{out_dir}/{n}") for n in names))


def rules():
    return (*collect_rules(), UnionRule(PackageFieldSet, NativeEngineFieldSet))
