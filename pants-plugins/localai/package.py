"""`pants package backends/<name>:<accel>`: the backend PEX and the LocalAI backend folder.

Output, under dist/backends/<name>/<accel>/ (the folder LocalAI loads):
  backend.pex/             the gRPC server, a PEX in pex's `packed` layout (a directory):
                           backend.pex/__main__.py --addr host:port. Each wheel is one zip under
                           backend.pex/.deps/, zipped once per wheel version in the pex_root
                           named cache and reused by every backend that carries it (a zipapp
                           re-compresses all of torch on every build); in the OCI image each big
                           wheel is a layer of its own, shared by every image that carries it
  run.sh                   what LocalAI executes; passes its arguments to the PEX
  python/                  the portable CPython run.sh starts the PEX with, when
                           [localai-portable-python].archive is set (portable_python.py)
  build-record.json        name, accelerator, capabilities, version, lockfile and artifact sha256
                           (not metadata.json: LocalAI writes its own file of that name into
                           every installed backend folder)
  sbom.cdx.json            CycloneDX SBOM from the lockfile (sbom.py)
  provenance.intoto.json   in-toto / SLSA provenance statement (provenance.py)
and under dist/images/<name>/<accel>/ the OCI image of that folder (image.py).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from pants.backend.python.pip_requirement import PipRequirement
from pants.backend.python.target_types import EntryPoint, PexLayout
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import Pex, PexRequest
from pants.backend.python.util_rules.pex_requirements import PexRequirements, Resolve
from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact, PackageFieldSet
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.engine.fs import (
    AddPrefix,
    CreateDigest,
    Digest,
    DigestContents,
    DigestEntries,
    DigestSubset,
    FileContent,
    FileEntry,
    MergeDigests,
    PathGlobs,
    RemovePrefix,
)
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.addresses import Address
from pants.engine.target import (
    Dependencies,
    DependenciesRequest,
    Targets,
    TransitiveTargets,
    TransitiveTargetsRequest,
    WrappedTarget,
    WrappedTargetRequest,
)
from pants.engine.unions import UnionRule
from pants.util.logging import LogLevel

from pants.backend.python.util_rules.pex_cli import PexCli
from pants.version import VERSION as PANTS_VERSION

from localai.image import BackendImage, BackendImageRequest
from localai.portable_python import DIR as PORTABLE_PYTHON_DIR
from localai.portable_python import PortablePython, PortablePythonRequest, python_version_of
from localai.proto import CompiledProto, CompileProtoRequest
from localai.provenance import PROVENANCE_NAME, provenance_statement
from localai.sbom import SBOM_NAME, cyclonedx_sbom, engine_components
from localai.requirements import LayeredRequirements, RequirementsOfVariant
from localai import localai_package
from localai.target_types import (
    LOCALAI_LAYOUT,
    AcceleratorField,
    LocalAISourcesField,
    ProtoSourcesField,
)
from localai.lockfile import Lockfile, LockfileRequest, MaybeLockfile
from localai.native.model_conversion import ConvertedModelFieldSet
from localai.native.rules import NativeEngineFieldSet
from localai.variant import BackendVariant, BackendVariantRequest, MissingLockfileError, Variant

BACKEND_PACKAGE = "localai_backend"  # the backend's own files, whatever its folder is called
ENTRY_POINT = f"{BACKEND_PACKAGE}.backend:main"
BUILD_RECORD = "build-record.json"  # never metadata.json: LocalAI owns that name in a backend folder
# Needed to compile backend.proto at build time, not at run time: kept out of the PEX.
BUILD_ONLY_REQUIREMENT = "grpcio-tools"


@dataclass(frozen=True)
class BackendVariantFieldSet(PackageFieldSet):
    # The variant's settings are read through variant.BackendVariant, their one reader.
    required_fields = (AcceleratorField,)

    accelerator: AcceleratorField


@dataclass(frozen=True)
class BackendSourcesRequest:
    variant: Variant
    resolve_ics: InterpreterConstraints


@dataclass(frozen=True)
class BackendSources:
    """The Python files of the PEX: runtime, generated stubs, and the backend as localai_backend/."""

    digest: Digest
    sbom_components: tuple[str, ...] = ()  # JSON components of native engines carried as package data


@dataclass(frozen=True)
class EngineArtifactsRequest:
    address: Address


@dataclass(frozen=True)
class EngineArtifacts:
    """The variant's direct dependencies that are native engines or converted models, built, under
    localai_backend/ in the PEX: a backend serving engines/minilm finds
    localai_backend/engines/minilm/<CPU level>/libminilm.so as package data."""

    digest: Digest
    sbom_components: tuple[str, ...] = ()  # JSON of sbom.engine_components, for the backend's SBOM


NATIVE_TOOLCHAIN_LOCK = "lockfiles/native-toolchain.lock"


@rule(desc="Build a backend's native engines", level=LogLevel.DEBUG)
async def build_engine_artifacts(request: EngineArtifactsRequest) -> EngineArtifacts:
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, description_of_origin="<localai>"))
    direct = await Get(Targets, DependenciesRequest(wrapped.target[Dependencies]))
    # Native engines and converted models, by their field sets: no other packageable dependency
    # is carried into the PEX.
    engines = [NativeEngineFieldSet.create(t) for t in direct if NativeEngineFieldSet.is_applicable(t)]
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
        # The engines' build records (localai.native.rules.BUILD_RECORD).
        records = await Get(DigestContents, DigestSubset(merged, PathGlobs(["**/build-record.json"])))
        toolchain = await Get(MaybeLockfile, LockfileRequest(NATIVE_TOOLCHAIN_LOCK))
        components = tuple(
            json.dumps(c, sort_keys=True)  # hashable, as engine values must be
            for c in engine_components(
                {fc.path: json.loads(fc.content) for fc in records},
                toolchain.lockfile.requirements() if toolchain.lockfile else (),
            )
        )
    return EngineArtifacts(await Get(Digest, AddPrefix(merged, BACKEND_PACKAGE)), components)


@rule(desc="Assemble a backend's sources", level=LogLevel.DEBUG)
async def assemble_backend_sources(request: BackendSourcesRequest) -> BackendSources:
    variant = request.variant
    transitive, engines = await MultiGet(
        Get(TransitiveTargets, TransitiveTargetsRequest([variant.address])),
        Get(EngineArtifacts, EngineArtifactsRequest(variant.address)),
    )
    py_targets = [t for t in transitive.closure if t.has_field(LocalAISourcesField)]
    proto_targets = [t for t in transitive.closure if t.has_field(ProtoSourcesField)]
    py, protos = await MultiGet(
        Get(SourceFiles, SourceFilesRequest([t[LocalAISourcesField] for t in py_targets])),
        Get(SourceFiles, SourceFilesRequest([t[ProtoSourcesField] for t in proto_targets])),
    )
    compiled = await Get(
        CompiledProto,
        CompileProtoRequest(variant.resolve, request.resolve_ics, protos.snapshot.digest, protos.snapshot.files),
    )
    own_prefix = variant.directory + "/"
    own = [f for f in py.snapshot.files if f.startswith(own_prefix)]
    shared = [f for f in py.snapshot.files if not f.startswith(own_prefix)]
    own_digest, shared_digest = await MultiGet(
        Get(Digest, DigestSubset(py.snapshot.digest, PathGlobs(own))),
        Get(Digest, DigestSubset(py.snapshot.digest, PathGlobs(shared))),
    )
    own_digest = await Get(Digest, RemovePrefix(own_digest, variant.directory))
    own_digest = await Get(Digest, AddPrefix(own_digest, BACKEND_PACKAGE))
    digest = await Get(Digest, MergeDigests([own_digest, shared_digest, compiled.digest, engines.digest]))
    return BackendSources(digest, engines.sbom_components)


@dataclass(frozen=True)
class PexTree:
    """A packed PEX (a directory) as one artifact: its sha256 is that of `sha256sum`'s listing of
    its files, so anyone can recompute it with coreutils:
        cd backend.pex && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum
    """

    sha256: str
    size: int

    @classmethod
    def of(cls, entries, root: str) -> "PexTree":
        files = sorted(
            (e.path[len(root) + 1 :], e.file_digest) for e in entries if isinstance(e, FileEntry) and e.path.startswith(root + "/")
        )
        listing = "".join(f"{d.fingerprint}  {path}\n" for path, d in files)
        return cls(hashlib.sha256(listing.encode()).hexdigest(), sum(d.serialized_bytes_length for _, d in files))


def build_record_json(
    variant: Variant,
    version: str,
    lockfile: Lockfile,
    pex_tree: PexTree,
    pin_policy: tuple[str, ...] = (),
    interpreter: dict | None = None,
) -> bytes:
    return (
        json.dumps(
            {
                "name": variant.backend,
                "accelerator": variant.accelerator.name,
                "capabilities": list(variant.accelerator.capabilities),
                "version": version,
                "resolve": variant.resolve,
                "lockfile": lockfile.path,
                "lockfile_sha256": lockfile.sha256,
                "artifact": "backend.pex",
                "artifact_sha256": pex_tree.sha256,  # PexTree: the sha256sum listing of backend.pex/
                "artifact_size": pex_tree.size,
                "sbom": SBOM_NAME,
                "provenance": PROVENANCE_NAME,
                # Imported LocalAI folders: pins the accelerator's policy replaced (localai_layout.py).
                **({"pin_policy": list(pin_policy)} if pin_policy else {}),
                # The portable CPython in python/ (portable_python.py); absent: the host's python.
                **({"interpreter": interpreter} if interpreter else {}),
            },
            indent=2,
            sort_keys=True,
        )
        + "\n"
    ).encode()


class GrpcToolsMissingError(ValueError):
    pass


@rule(desc="Package a LocalAI backend variant", level=LogLevel.INFO)
async def package_backend_variant(field_set: BackendVariantFieldSet, pex_cli: PexCli) -> BuiltPackage:
    backend_variant = await Get(BackendVariant, BackendVariantRequest(field_set.address))
    variant, lockfile = backend_variant.variant, backend_variant.locked()
    layered = await Get(LayeredRequirements, RequirementsOfVariant(field_set.address, variant))
    localai_layout = backend_variant.layout == LOCALAI_LAYOUT
    if layered.unsatisfied:
        raise MissingLockfileError(
            f"{variant.address}: the {variant.accelerator.name} pin policy cannot satisfy this backend: "
            + "; ".join(layered.unsatisfied)
        )
    by_name = {PipRequirement.parse(r).project_name.lower(): r for r in layered.requirements}
    if BUILD_ONLY_REQUIREMENT not in by_name:
        raise GrpcToolsMissingError(
            f"{variant.address}: {variant.directory}/requirements.txt must pin grpcio-tools (the "
            "build compiles backend.proto with it, from the same lock as grpcio/protobuf)."
        )
    ics = InterpreterConstraints([variant.accelerator.python])
    portable = await Get(PortablePython, PortablePythonRequest(python_version_of(variant.accelerator.python)))
    if localai_layout:
        folder_sources = await Get(
            localai_package.LocalAIFolderSources, localai_package.LocalAIFolderSourcesRequest(variant, ics)
        )
        sources = BackendSources(folder_sources.digest)
    else:
        sources = await Get(BackendSources, BackendSourcesRequest(variant, ics))
    prefix = f"backends/{variant.backend}/{variant.accelerator.name}"
    pex = await Get(
        Pex,
        PexRequest(
            output_filename=f"{prefix}/backend.pex",
            internal_only=False,
            layout=PexLayout.PACKED,
            requirements=PexRequirements(
                [r for name, r in by_name.items() if name != BUILD_ONLY_REQUIREMENT],
                from_superset=Resolve(variant.resolve, False),
                description_of_origin=str(variant.address),
            ),
            interpreter_constraints=ics,
            sources=sources.digest,
            main=EntryPoint.parse(localai_package.ENTRY_POINT if localai_layout else ENTRY_POINT),
            # venv execution mode: the first start unpacks into PEX_ROOT once, later starts reach
            # Health OK as fast as a plain venv (docs/benchmarks.md, cold start).
            additional_args=("--venv",),
            description=f"Build {prefix}/backend.pex",
        ),
    )
    pex_tree = PexTree.of(await Get(DigestEntries, Digest, pex.digest), f"{prefix}/backend.pex")
    size, pex_sha = pex_tree.size, pex_tree.sha256
    version = backend_variant.version
    record = build_record_json(
        variant, version, lockfile, pex_tree, layered.replacements, portable.record() if portable.enabled else None
    )
    sbom = cyclonedx_sbom(
        name=variant.backend,
        version=version,
        artifact="backend.pex",
        artifact_sha256=pex_sha,
        lockfile=lockfile.path,
        lockfile_sha256=lockfile.sha256,
        requirements=lockfile.requirements(),
        extra_components=(*(json.loads(c) for c in sources.sbom_components), *portable.sbom_components()),
    )
    run_sh = portable.run_sh().encode()
    provenance = provenance_statement(
        target=str(variant.address),
        subjects={
            "backend.pex": pex_sha,
            "run.sh": hashlib.sha256(run_sh).hexdigest(),
            BUILD_RECORD: hashlib.sha256(record).hexdigest(),
            SBOM_NAME: hashlib.sha256(sbom).hexdigest(),
        },
        lockfile=lockfile.path,
        lockfile_sha256=lockfile.sha256,
        sources_digest=sources.digest.fingerprint,
        pex_version=pex_cli.version,
        pex_sha256=pex_tool_sha256(pex_cli),
        python=variant.accelerator.python,
        pants_version=str(PANTS_VERSION),
        extra_materials=portable.materials(),
    )
    files = await Get(
        Digest,
        CreateDigest(
            [
                FileContent("run.sh", run_sh, is_executable=True),
                FileContent(BUILD_RECORD, record),
                FileContent(SBOM_NAME, sbom),
                FileContent(PROVENANCE_NAME, provenance),
            ]
        ),
    )
    pex_at_root = await Get(Digest, RemovePrefix(pex.digest, prefix))
    folder = await Get(Digest, MergeDigests([pex_at_root, files, portable.digest]))
    entry = f"{variant.accelerator.name}-{variant.backend}"
    image = await Get(
        BackendImage,
        BackendImageRequest(
            folder,
            variant.backend,
            variant.accelerator.name,
            entry,
            (
                ("org.opencontainers.image.title", entry),
                ("org.opencontainers.image.version", version),
                ("io.localai.backend", variant.backend),
                ("io.localai.accelerator", variant.accelerator.name),
                ("io.localai.lockfile.sha256", lockfile.sha256),
            ),
            ics,
            own_layer_dirs=(PORTABLE_PYTHON_DIR,) if portable.enabled else (),
        ),
    )
    digest = await Get(Digest, MergeDigests([await Get(Digest, AddPrefix(folder, prefix)), image.digest]))
    return BuiltPackage(
        digest,
        (
            BuiltPackageArtifact(f"{prefix}/backend.pex/", (f"{size / 1e6:.1f} MB, tree sha256 {pex_sha}",)),
            BuiltPackageArtifact(f"{prefix}/run.sh"),
            BuiltPackageArtifact(f"{prefix}/{BUILD_RECORD}"),
            BuiltPackageArtifact(f"{prefix}/{SBOM_NAME}"),
            BuiltPackageArtifact(f"{prefix}/{PROVENANCE_NAME}"),
            BuiltPackageArtifact(f"images/{variant.backend}/{variant.accelerator.name}/", (f"OCI image {image.manifest_digest}",)),
        ),
    )


def pex_tool_sha256(pex_cli: PexCli) -> str:
    """The pinned sha256 of the pex tool for this platform (all platforms share one file here)."""
    for known in pex_cli.known_versions:
        version, platform, sha, _ = (x.strip() for x in known.split("|"))
        if version == pex_cli.version and platform == "linux_x86_64":
            return sha
    return ""


def rules():
    return (*collect_rules(), UnionRule(PackageFieldSet, BackendVariantFieldSet))
