"""The Python files of a backend PEX, for both layouts, from one assembly.

A backend of this repository (`layout="backend"`):
    localai_backend/backend.py (+ its other files)     main() is the entry point
    backends/common/..., backends/proto/backend_pb2*    the shared runtime and the stubs, as imported
    localai_backend/engines/<engine>/<level>/...        native engines and converted models it depends on

An imported LocalAI folder (`layout="localai"`), laid out as its backend.py expects:
    localai_backend/backend.py (+ the folder's other modules    run as __main__ (its serve() on --addr)
      and packages, at any depth)                               by localai_backend/__main__.py, with
                                                                its folder first on sys.path, as
                                                                under `python backend.py`
    common/grpc_auth.py ...                                      LocalAI's helpers: backend.py's
                                                                 sys.path insert of <its dir>/../common
    backend_pb2.py, backend_pb2_grpc.py                          top level, as `import backend_pb2` expects

The stubs are compiled from backends/proto (once per grpcio-tools version: proto.py) with the
variant's own grpcio-tools for a backend of this repository, with the `grpc-stubs` resolve's for
an imported folder, and checked against the grpcio and protobuf the variant locks. The folder is
`localai_backend`, not the backend's name: LocalAI's rerankers backend imports the PyPI package
`rerankers`, which a folder of that name would shadow.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePath

from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.core.goals.package import BuiltPackage
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.engine.addresses import Address
from pants.engine.fs import (
    AddPrefix,
    CreateDigest,
    Digest,
    DigestContents,
    DigestSubset,
    MergeDigests,
    PathGlobs,
    RemovePrefix,
)
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import (
    Dependencies,
    DependenciesRequest,
    Targets,
    TransitiveTargets,
    TransitiveTargetsRequest,
    WrappedTarget,
    WrappedTargetRequest,
)
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.folder import BACKEND_PACKAGE, BUILD_RECORD, SITE_PACKAGES
from localai.model.layout import Layout
from localai.model.localai_layout import COMMON_DIR
from localai.model.lockfile import LockfileRequest, MaybeLockfile
from localai.model.variant import Variant, lockfile_path
from localai.native.cpu_levels import CpuLevelTable
from localai.native.model_conversion import ConvertedModelFieldSet
from localai.native.options import NativeSubsystem, kept_engines, wrong_platform_engines
from localai.native.rules import NATIVE_TOOLCHAIN_LOCK, NativeEngineFieldSet
from localai.package.proto import STUBS_RESOLVE, CompiledProto, VariantStubsRequest
from localai.package.sbom import engine_components
from localai.scripts import script_file
from localai.target_types import LocalAISourcesField, ProtoSourcesField

LOCALAI_MAIN = f"{BACKEND_PACKAGE}/__main__.py"


class LocalAIFolderError(LocalAIError):
    pass


class EngineArtifactsError(LocalAIError):
    pass


@dataclass(frozen=True)
class BackendSourcesRequest:
    variant: Variant
    resolve_ics: InterpreterConstraints
    layout: Layout


@dataclass(frozen=True)
class BackendSources:
    digest: Digest
    entry_point: str
    sbom_components: tuple[str, ...] = ()  # JSON components of native engines carried as package data


@dataclass(frozen=True)
class EngineArtifactsRequest:
    address: Address
    machine: str  # the variant's platform.machine(): its engines must be built for it


@dataclass(frozen=True)
class EngineArtifacts:
    """The variant's direct dependencies that are native engines or converted models, built, under
    localai_backend/ in the PEX: a backend serving engines/minilm finds
    localai_backend/engines/minilm/<CPU level>/libminilm.so as package data."""

    digest: Digest
    sbom_components: tuple[str, ...] = ()  # JSON of sbom.engine_components, for the backend's SBOM


@rule(desc="Build a backend's native engines", level=LogLevel.DEBUG)
async def build_engine_artifacts(request: EngineArtifactsRequest, native: NativeSubsystem) -> EngineArtifacts:
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, description_of_origin="<localai>"))
    direct = await Get(Targets, DependenciesRequest(wrapped.target[Dependencies]))
    # Native engines and converted models, by their field sets: no other packageable dependency
    # is carried into the PEX.
    engine_sets = [NativeEngineFieldSet.create(t) for t in direct if NativeEngineFieldSet.is_applicable(t)]
    # The level table only where there are engines: a backend without any needs no table.
    platform_of = dict((await Get(CpuLevelTable)).platforms) if engine_sets else {}
    wrong = wrong_platform_engines([(fs.cpu_level.value, fs.address.spec) for fs in engine_sets], request.machine, platform_of)
    if wrong:
        raise EngineArtifactsError(
            f"{request.address}: runs on {request.machine}, but its engines include {', '.join(wrong)}, "
            f"which its CPython cannot load. Fix: in the BUILD file, list the engines' {request.machine} "
            f"builds for this variant (`engines=[...]` for x86_64, `arm64_engines=[...]` for aarch64)."
        )
    engines = kept_engines(request.address.spec, [(fs.cpu_level.value, fs) for fs in engine_sets], native.cpu_levels, platform_of)
    models = [ConvertedModelFieldSet.create(t) for t in direct if ConvertedModelFieldSet.is_applicable(t)]
    built = await MultiGet(
        [
            *(Get(BuiltPackage, NativeEngineFieldSet, fs) for fs in engines),
            *(Get(BuiltPackage, ConvertedModelFieldSet, fs) for fs in models),
        ]
    )
    merged = await Get(Digest, MergeDigests(b.digest for b in built))
    components: tuple = ()
    if built:
        records = await Get(DigestContents, DigestSubset(merged, PathGlobs([f"**/{BUILD_RECORD}"])))
        toolchain = await Get(MaybeLockfile, LockfileRequest(NATIVE_TOOLCHAIN_LOCK))
        components = tuple(
            json.dumps(c, sort_keys=True)  # hashable, as engine values must be
            for c in engine_components(
                {fc.path: json.loads(fc.content) for fc in records},
                toolchain.lockfile.requirements() if toolchain.lockfile else (),
                prefix=f"{SITE_PACKAGES}/{BACKEND_PACKAGE}",  # where the folder carries them
            )
        )
    return EngineArtifacts(await Get(Digest, AddPrefix(merged, BACKEND_PACKAGE)), components)


async def _moved(digest: Digest, files: list[str], strip: str, prefix: str) -> Digest:
    subset = await Get(Digest, DigestSubset(digest, PathGlobs(files)))
    stripped = await Get(Digest, RemovePrefix(subset, strip)) if strip else subset
    return await Get(Digest, AddPrefix(stripped, prefix)) if prefix else stripped


async def _localai_folder(request: BackendSourcesRequest, py: SourceFiles, protos: SourceFiles) -> list[Digest]:
    variant = request.variant
    own_dir = variant.directory
    common_dir = str(PurePath(own_dir).parent / COMMON_DIR)
    # The folder's files at any depth (its sibling packages too); only its own: the other
    # backend folders are its siblings, not its children.
    own = [f for f in py.snapshot.files if f.startswith(own_dir + "/")]
    common = [f for f in py.snapshot.files if f.startswith(common_dir + "/")]
    if f"{own_dir}/backend.py" not in own:
        raise LocalAIFolderError(
            f"{variant.address}: {own_dir}/backend.py is missing: LocalAI runs backend.py. Fix: copy "
            f"LocalAI's folder unchanged, or remove the variant (`./pants localai-import` again)."
        )
    if len(protos.snapshot.files) != 1:
        raise LocalAIFolderError(f"{variant.address}: expected one .proto (backends/proto/backend.proto), got {protos.snapshot.files}")
    (proto_path,) = protos.snapshot.files
    # Compiled at the top level: `import backend_pb2`, and backend_pb2_grpc imports it as such.
    top_level_proto = await Get(Digest, RemovePrefix(protos.snapshot.digest, str(PurePath(proto_path).parent)))
    # LocalAI's folders take their stubs from the project's stubs tool: no grpcio-tools joins their resolves.
    compiled = await Get(
        CompiledProto,
        VariantStubsRequest(
            str(variant.address), variant.resolve, STUBS_RESOLVE, request.resolve_ics, top_level_proto, (PurePath(proto_path).name,)
        ),
    )
    if f"{own_dir}/__main__.py" in own:
        raise LocalAIFolderError(
            f"{variant.address}: {own_dir}/__main__.py would replace the launcher that runs backend.py "
            f"(localai_backend/__main__.py). Fix: rename it; LocalAI runs backend.py, not the folder."
        )
    main = await Get(Digest, CreateDigest([script_file("localai.package", "localai_main.py", LOCALAI_MAIN)]))
    parts = [await _moved(py.snapshot.digest, own, own_dir, BACKEND_PACKAGE), compiled.digest, main]
    if common:
        parts.append(await _moved(py.snapshot.digest, common, common_dir, COMMON_DIR))
    return parts


async def stubs_tool_resolve(variant: Variant) -> str:
    """The resolve whose grpcio-tools compiles a variant's stubs: its own; for a cross-built one
    (whose grpcio-tools cannot run here) its build-machine sibling's, else the `grpc-stubs` tool's."""
    if not variant.platform.cross:
        return variant.resolve
    sibling = await Get(MaybeLockfile, LockfileRequest(lockfile_path(variant.tool_resolve)))
    return variant.tool_resolve if sibling.lockfile else STUBS_RESOLVE


async def _own_backend(request: BackendSourcesRequest, py: SourceFiles, protos: SourceFiles) -> list[Digest]:
    variant = request.variant
    tool_resolve = await stubs_tool_resolve(variant)
    compiled = await Get(
        CompiledProto,
        VariantStubsRequest(
            str(variant.address), variant.resolve, tool_resolve, request.resolve_ics, protos.snapshot.digest, protos.snapshot.files
        ),
    )
    own_prefix = variant.directory + "/"
    own = [f for f in py.snapshot.files if f.startswith(own_prefix)]
    shared = [f for f in py.snapshot.files if not f.startswith(own_prefix)]
    return [
        await _moved(py.snapshot.digest, own, variant.directory, BACKEND_PACKAGE),
        await _moved(py.snapshot.digest, shared, "", ""),
        compiled.digest,
    ]


@rule(desc="Assemble a backend's sources", level=LogLevel.DEBUG)
async def assemble_backend_sources(request: BackendSourcesRequest) -> BackendSources:
    variant = request.variant
    transitive = await Get(TransitiveTargets, TransitiveTargetsRequest([variant.address]))
    py, protos = await MultiGet(
        Get(SourceFiles, SourceFilesRequest([t[LocalAISourcesField] for t in transitive.closure if t.has_field(LocalAISourcesField)])),
        Get(SourceFiles, SourceFilesRequest([t[ProtoSourcesField] for t in transitive.closure if t.has_field(ProtoSourcesField)])),
    )
    if request.layout.imported:
        parts, components = await _localai_folder(request, py, protos), ()
    else:
        engines = await Get(EngineArtifacts, EngineArtifactsRequest(variant.address, variant.platform.machine))
        parts, components = [*await _own_backend(request, py, protos), engines.digest], engines.sbom_components
    return BackendSources(await Get(Digest, MergeDigests(parts)), request.layout.entry_point, components)


def rules():
    return collect_rules()
