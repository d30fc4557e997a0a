"""`pants package backends/<name>:<accel>`: the LocalAI backend folder, its OCI image and its PEX.

Output, under dist/backends/<name>/<accel>/ (the folder LocalAI loads):
  run.sh                   what LocalAI executes: `python -I -S -B start.py`, its arguments passed on
  start.py                 the backend's entry point, site-packages/ alone on sys.path (install.py)
  site-packages/           the locked distributions and the backend's own files, installed and
                           compiled at build time: the first start imports and answers, and nothing
                           is written outside the folder, even with a read-only folder or HOME
  python/                  the portable CPython run.sh starts the backend with, when
                           [localai-portable-python].archive is set (portable_python.py)
  build-record.json        name, accelerator, platform, capabilities, version, lockfile, site-packages/
                           and PEX sha256 (not metadata.json: LocalAI writes its own file of that
                           name into every installed backend folder)
  sbom.cdx.json            CycloneDX SBOM from the lockfile (sbom.py, records.py)
  provenance.intoto.json   in-toto / SLSA provenance statement (provenance.py)
  provenance.intoto.dsse.json  that statement signed (DSSE), only when [localai-signing].key_file
                           is set (signing.py); checked by `./pants localai-verify`
under dist/images/<name>/<accel>/ the OCI image of that folder (image.py), and under
dist/pex/<name>/<accel>/backend.pex/ the PEX the folder is installed from: one directory in pex's
`packed` layout (`python backend.pex --addr host:port`), each wheel one zip under .deps/, for
those who want the backend as one relocatable unit (it installs itself into PEX_ROOT on first run).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from pants.backend.python.target_types import EntryPoint, PexLayout
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import CompletePlatforms, Pex, PexRequest
from pants.backend.python.util_rules.pex_cli import PexCli
from pants.backend.python.util_rules.pex_requirements import PexRequirements, Resolve
from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact, PackageFieldSet
from pants.engine.fs import (
    EMPTY_DIGEST,
    AddPrefix,
    CreateDigest,
    Digest,
    DigestEntries,
    MergeDigests,
    PathGlobs,
    RemovePrefix,
    Snapshot,
)
from pants.engine.platform import Platform
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.unions import UnionRule
from pants.util.logging import LogLevel
from pants.version import VERSION as PANTS_VERSION

from localai.errors import LocalAIError
from localai.model.accelerators import python_version_of
from localai.model.artifact import BackendPex, BackendVariantFieldSet, FileTree, VariantPexRequest
from localai.model.folder import (
    ARTIFACT,
    BUILD_RECORD,
    ENVELOPE_NAME,
    PEX_DIR,
    PORTABLE_PYTHON_DIR,
    PROVENANCE_NAME,
    RUN_SH,
    SBOM_NAME,
    SITE_PACKAGES,
    START_PY,
)
from localai.model.variant import Variant
from localai.model.wheelhouse import WheelhouseUrls, WheelhouseUrlsRequest
from localai.oci.image import BackendImage, BackendImageRequest, image_dir
from localai.package.audit import ArtifactAudit, BuiltArtifact, built_artifact
from localai.package.inputs import VariantInputs, VariantInputsRequest
from localai.package.install import InstalledBackend, InstalledBackendRequest, start_py
from localai.package.options import AuditSubsystem
from localai.package.pex_assembly import SplitPexRequest
from localai.package.portable_python import PortablePython, PortablePythonRequest
from localai.package.records import folder_records
from localai.package.signing import ProvenanceEnvelope, ProvenanceEnvelopeRequest
from localai.package.source_checkout import SourceCheckout, SourceCheckoutRequest
from localai.package.sources import BackendSources

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class BackendPexRequest:
    variant: Variant
    requirements: tuple[str, ...]
    sources: BackendSources
    interpreter_constraints: InterpreterConstraints
    exclude: tuple[str, ...] = ()  # BUILD `exclude`


class CompletePlatformMissingError(LocalAIError):
    pass


async def complete_platforms_of(variant: Variant) -> CompletePlatforms:
    """The pex complete platform a cross-built variant is locked and built for (its file and digest)."""
    snapshot = await Get(Snapshot, PathGlobs([variant.platform.complete_platform]))
    if not snapshot.files:
        raise CompletePlatformMissingError(
            f"{variant.address}: {variant.platform.complete_platform} is missing: the {variant.platform.name} "
            "build resolves for it. Fix: restore it from git (docs/arm64.md says how it was made)."
        )
    return CompletePlatforms.from_snapshot(snapshot)


@rule(desc="Build a backend PEX", level=LogLevel.DEBUG)
async def build_backend_pex(request: BackendPexRequest) -> BackendPex:
    variant = request.variant
    path = f"{variant.folder}/{ARTIFACT}"
    complete_platforms, cross_args = CompletePlatforms(), ()
    if variant.platform.cross:
        # Resolved for the platform, never run here: no interpreter of it is needed to build.
        complete_platforms = await complete_platforms_of(variant)
        # Its shebang cannot name a build-machine interpreter: the target's python3.11 from PATH.
        cross_args = ("--python-shebang", "/usr/bin/env python3.11")
    # BUILD `exclude`: pex leaves each project out, with what only it needs, and its boot-time
    # resolve does not ask for them (PEX-INFO `excluded`).
    exclude_args = tuple(f"--exclude={project}" for project in request.exclude)
    # Built as pex's one-shot build would be, in two steps: the requirements PEX (cached by the
    # lock, untouched by a source edit), then the sources and the files naming them (pex_assembly.py).
    pex = await Get(
        Pex,
        SplitPexRequest(PexRequest(
            output_filename=path,
            internal_only=False,
            layout=PexLayout.PACKED,
            requirements=PexRequirements(
                request.requirements, from_superset=Resolve(variant.resolve, False), description_of_origin=str(variant.address)
            ),
            interpreter_constraints=request.interpreter_constraints,
            complete_platforms=complete_platforms,
            sources=request.sources.digest,
            main=EntryPoint.parse(request.sources.entry_point),
            # venv execution mode: the first start unpacks into PEX_ROOT once, later starts reach
            # Health OK as fast as a plain venv (docs/benchmarks.md, cold start). Its site-packages
            # holds files (hard links), not symlinks into each wheel's own directory, as a pip-installed
            # venv does: an extension's $ORIGIN RUNPATH then finds the libraries another wheel put
            # beside it (mlx's core.so loads mlx/lib/libmlx.so, which mlx-cpu installs).
            # --no-pre-install-wheels: .deps/ keeps each locked wheel as downloaded (the folder's
            # install step installs it; pip installing each wheel and pex re-zipping the result
            # were most of a cold build); a PEX run as one file installs them in parallel.
            additional_args=(
                "--venv", "--venv-site-packages-copies", "--no-pre-install-wheels", "--max-install-jobs=-1",
                *cross_args, *exclude_args,
            ),
            description=f"Build {path}",
        )),
    )
    tree = FileTree.of(await Get(DigestEntries, Digest, pex.digest), path)
    return BackendPex(await Get(Digest, RemovePrefix(pex.digest, variant.folder)), tree)


def image_request(variant: Variant, version: str, lockfile_sha256: str, folder: Digest, portable: PortablePython) -> BackendImageRequest:
    return BackendImageRequest(
        folder,
        variant.backend,
        variant.name,
        variant.entry,
        (
            ("org.opencontainers.image.title", variant.entry),
            ("org.opencontainers.image.version", version),
            ("io.localai.backend", variant.backend),
            ("io.localai.accelerator", variant.accelerator.name),
            ("io.localai.model.lockfile.sha256", lockfile_sha256),
        ),
        architecture=variant.platform.oci_architecture,
        own_layer_dirs=(PORTABLE_PYTHON_DIR,) if portable.enabled else (),
    )


class ArtifactAuditError(LocalAIError):
    pass


def check_audit(address, audit: ArtifactAudit, build_file: str) -> str | None:
    """What `pants lint` refuses in a built artifact, at `pants package`: an ELF file that cannot
    load where the artifact runs (a GPU runtime its accelerator does not allow, another machine's
    code) fails packaging; a library a host may lack, or a size over budget, is the warning returned."""
    cannot_load = audit.gpu_links + audit.wrong_machine
    if cannot_load:
        raise ArtifactAuditError(
            f"{address}: the built artifact fails the audit (`pants lint`), and nothing was written:"
            + "".join(f"\n  {line}" for line in cannot_load)
        )
    over = (f"{audit.size_line}: over budget; shrink the requirements, or raise size_budget_mb in {build_file}",)
    warnings = audit.host_libs + (over if audit.over_budget else ())
    if not warnings:
        return None
    return f"{address}: the built artifact fails the audit (`pants lint`):" + "".join(f"\n  {w}" for w in warnings)


@rule(desc="Build a backend variant's PEX", level=LogLevel.DEBUG)
async def variant_pex(request: VariantPexRequest) -> BackendPex:
    inputs = await Get(VariantInputs, VariantInputsRequest(request.address))
    return await Get(
        BackendPex,
        BackendPexRequest(inputs.variant, inputs.requirements, inputs.sources, inputs.interpreter_constraints, inputs.exclude),
    )


@rule(desc="Package a LocalAI backend variant", level=LogLevel.INFO)
async def package_backend_variant(
    field_set: BackendVariantFieldSet, pex_cli: PexCli, platform: Platform, audit: AuditSubsystem
) -> BuiltPackage:
    inputs = await Get(VariantInputs, VariantInputsRequest(field_set.address))
    backend_variant, variant, layered, sources, ics = (
        inputs.backend_variant, inputs.variant, inputs.layered, inputs.sources, inputs.interpreter_constraints
    )
    lockfile, version = inputs.lockfile, backend_variant.version
    pex = await Get(BackendPex, VariantPexRequest(field_set.address))
    if variant.accelerator.name in audit.package_accelerators:  # the variants `pants lint` audits built
        audited = await Get(ArtifactAudit, BuiltArtifact, built_artifact(backend_variant, pex.digest))
        warning = check_audit(field_set.address, audited, f"{field_set.address.spec_path}/BUILD")
        if warning:
            logger.warning(warning)
    # The pinned portable CPython is an x86_64 build: a cross-built folder runs on the host's python3.11.
    portable = (
        PortablePython(EMPTY_DIGEST)
        if variant.platform.cross
        else await Get(PortablePython, PortablePythonRequest(python_version_of(variant.accelerator.python)))
    )
    installed = await Get(InstalledBackend, InstalledBackendRequest(pex.digest, sources.digest, sources.entry_point, ics))
    wheelhouse = await Get(WheelhouseUrls, WheelhouseUrlsRequest())
    checkout = await Get(SourceCheckout, SourceCheckoutRequest())
    records = folder_records(
        variant=variant,
        version=version,
        lockfile=lockfile,
        tree=installed.tree,
        pex_tree_sha256=pex.tree.sha256,
        start_py=start_py(sources.entry_point).encode(),
        pin_policy=layered.replacements,
        portable=portable,
        engine_components=sources.sbom_components,
        sources_digest=sources.digest.fingerprint,
        pex_version=pex_cli.version,
        pex_sha256=pex_tool_sha256(pex_cli, platform),
        pants_version=str(PANTS_VERSION),
        original_urls=wheelhouse.mapping(),
        source=checkout.material(),
        exempt=backend_variant.exempt,
    )
    statement = next(r.content for r in records if r.path == PROVENANCE_NAME)
    envelope = await Get(ProvenanceEnvelope, ProvenanceEnvelopeRequest(str(field_set.address), statement))
    folder = await Get(Digest, MergeDigests([installed.digest, await Get(Digest, CreateDigest(records)), envelope.digest, portable.digest]))
    image = await Get(BackendImage, BackendImageRequest, image_request(variant, version, lockfile.sha256, folder, portable))
    pex_dir = f"{PEX_DIR}/{variant.backend}/{variant.name}"
    digest = await Get(
        Digest,
        MergeDigests([await Get(Digest, AddPrefix(folder, variant.folder)), image.digest, await Get(Digest, AddPrefix(pex.digest, pex_dir))]),
    )
    tree = installed.tree
    return BuiltPackage(
        digest,
        (
            BuiltPackageArtifact(f"{variant.folder}/{SITE_PACKAGES}/", (f"{tree.size / 1e6:.1f} MB installed, tree sha256 {tree.sha256}",)),
            *(BuiltPackageArtifact(f"{variant.folder}/{name}") for name in (RUN_SH, START_PY, BUILD_RECORD, SBOM_NAME, PROVENANCE_NAME)),
            *((BuiltPackageArtifact(f"{variant.folder}/{ENVELOPE_NAME}", ("signed",)),) if envelope.signed else ()),
            BuiltPackageArtifact(f"{image_dir(variant.backend, variant.name)}/", (f"OCI image {image.manifest_digest}",)),
            BuiltPackageArtifact(f"{pex_dir}/{ARTIFACT}/", (f"{pex.tree.size / 1e6:.1f} MB, tree sha256 {pex.tree.sha256}",)),
        ),
    )


class PexToolError(LocalAIError):
    pass


def pex_tool_sha256(pex_cli: PexCli, platform: Platform) -> str:
    """The pinned sha256 of the pex tool for this platform, as [pex-cli].known_versions lists it."""
    for known in pex_cli.known_versions:
        version, known_platform, sha, _ = (x.strip() for x in known.split("|"))
        if version == pex_cli.version and known_platform == platform.value:
            return sha
    raise PexToolError(
        f"[pex-cli].known_versions has no sha256 for pex {pex_cli.version} on {platform.value}: provenance would name "
        "the pex tool without a digest. Fix: add its entry to pants.toml (./pants builds the tool and prints it)."
    )


def rules():
    return (*collect_rules(), UnionRule(PackageFieldSet, BackendVariantFieldSet))
