"""LocalAI's layered requirement files, read as one requirement set per variant."""
from __future__ import annotations

import os
from dataclasses import dataclass

from pants.backend.python.goals.lockfile import synthetic_lockfile_target_name
from pants.backend.python.pip_requirement import PipRequirement
from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.target_types import (
    PythonRequirementResolveField,
    PythonRequirementsField,
    PythonRequirementTarget,
    parse_requirements_file,
)
from pants.core.target_types import TargetGeneratorSourcesHelperSourcesField, TargetGeneratorSourcesHelperTarget
from pants.engine.addresses import Address
from pants.engine.fs import DigestContents, PathGlobs, Paths
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import (
    Dependencies,
    DependenciesRequest,
    GeneratedTargets,
    GenerateTargetsRequest,
    Target,
    UnexpandedTargets,
    WrappedTarget,
    WrappedTargetRequest,
)
from pants.engine.unions import UnionMembership, UnionRule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.accelerators import AcceleratorMatrix
from localai.model.layout import LAYOUTS
from localai.model.variant import Variant
from localai.target_types import AcceleratorField, LayoutField, LocalAIRequirementsGenerator, PlatformField


class RequirementsFileError(LocalAIError):
    pass


@dataclass(frozen=True)
class LocalAIRequirementsRequest:
    """Answered by model/localai_layout.py: a variant's requirements read LocalAI's way."""

    directory: str
    accelerator: str
    owner: str
    platform_suffix: str = ""  # a cross-built platform's: its pin policy ([localai.torch_family.<accel><suffix>])


@dataclass(frozen=True)
class LayeredRequirementsRequest:
    directory: str
    accelerator: str
    owner: str  # the target asking, for error messages
    layout: str = "backend"  # "localai": LocalAI's own folder (model/localai_layout.py)
    platform_suffix: str = ""  # a cross-built platform's: its overlay requirements-<accel><suffix>.txt


@dataclass(frozen=True)
class LayeredRequirements:
    """Requirement strings, one per project, overlay pins replacing base pins."""

    requirements: tuple[str, ...]
    files: tuple[str, ...]
    # LocalAI layout only: pins the accelerator's policy replaced (one sentence each), and what
    # the policy cannot provide (the variant is then not lockable).
    replacements: tuple[str, ...] = ()
    unsatisfied: tuple[str, ...] = ()
    # LocalAI layout only: the folder's own indexes its files name for this variant, declared in
    # [localai.overrides.<folder>] extra_indexes: its resolve alone sees them (Variant.pip_options).
    extra_indexes: tuple[str, ...] = ()


def normalized_name(project_name: str) -> str:
    return project_name.lower().replace("_", "-")


def layer_with_origin(files: list[tuple[str, str]]) -> dict[str, tuple[str, PipRequirement]]:
    """Merges requirement files in order; a later file's entry for a project replaces earlier ones.
    Returns {normalized project name: (the file its winning entry comes from, the requirement)}."""
    merged: dict[str, tuple[str, PipRequirement]] = {}
    for path, content in files:
        for req in parse_requirements_file(content, rel_path=path):
            merged[normalized_name(req.project_name)] = (path, req)
    return merged


def layer(files: list[tuple[str, str]]) -> tuple[str, ...]:
    """Merges requirement files in order; a later file's entry for a project replaces earlier ones."""
    merged = layer_with_origin(files)
    return tuple(str(merged[name][1]) for name in sorted(merged))


@rule(desc="Read layered requirements", level=LogLevel.DEBUG)
async def read_layered_requirements(request: LayeredRequirementsRequest) -> LayeredRequirements:
    if LAYOUTS[request.layout].imported:
        return await Get(
            LayeredRequirements,
            LocalAIRequirementsRequest(request.directory, request.accelerator, request.owner, request.platform_suffix),
        )
    paths = (
        f"{request.directory}/requirements.txt",
        f"{request.directory}/requirements-{request.accelerator}.txt",
        *((f"{request.directory}/requirements-{request.accelerator}{request.platform_suffix}.txt",) if request.platform_suffix else ()),
    )
    contents = await Get(
        DigestContents, PathGlobs(paths)
    )
    found = {fc.path: fc.content.decode() for fc in contents}
    missing = [p for p in paths if p not in found]
    if missing:
        overlay = f", then requirements-{request.accelerator}{request.platform_suffix}.txt (its platform's)" if request.platform_suffix else ""
        declared = "arm64" if request.platform_suffix else "accelerators"
        raise RequirementsFileError(
            f"{request.owner}: missing {', '.join(missing)}. A backend variant reads "
            f"requirements.txt (shared pins), requirements-{request.accelerator}.txt "
            f"(this accelerator's pins; it may hold only a comment){overlay}. Create the file, or remove "
            f"'{request.accelerator}' from {declared}=[...] in {request.directory}/BUILD."
        )
    try:
        reqs = layer([(p, found[p]) for p in paths])
    except ValueError as e:
        raise RequirementsFileError(f"{request.owner}: {e}") from e
    return LayeredRequirements(reqs, paths)


class GenerateLocalAIRequirementsRequest(GenerateTargetsRequest):
    generate_from = LocalAIRequirementsGenerator


def requirements_request(generator: Target, variant: Variant) -> LayeredRequirementsRequest:
    """The one request for a variant's requirements: the generator and packaging ask the same, so
    the engine reads and parses the files once."""
    return LayeredRequirementsRequest(
        variant.directory, variant.accelerator.name, str(generator.address), generator[LayoutField].value, variant.platform.suffix
    )


@rule(desc="Generate python_requirement targets of a backend variant", level=LogLevel.DEBUG)
async def generate_localai_requirements(
    request: GenerateLocalAIRequirementsRequest, union_membership: UnionMembership, python_setup: PythonSetup
) -> GeneratedTargets:
    generator = request.generator
    # The naming only, not pants.toml's check: `./pants localai-resolves` must be able to list
    # the variants whose entries pants.toml lacks (packaging checks them).
    variant = Variant.of_target(generator, await Get(AcceleratorMatrix))
    layered = await Get(LayeredRequirements, LayeredRequirementsRequest, requirements_request(generator, variant))
    # As Pants' python_requirements does: each requirement depends on the files it was read from
    # (one helper target per file) and on the resolve's lockfile target, so both are inputs Pants
    # sees (invalidation, --changed-since, the CI matrix). A lockfile not generated yet is no
    # target to depend on.
    file_targets = [
        TargetGeneratorSourcesHelperTarget(
            {TargetGeneratorSourcesHelperSourcesField.alias: os.path.relpath(path, variant.directory)},
            Address(
                variant.directory,
                target_name=request.template_address.target_name,
                relative_file_path=os.path.relpath(path, variant.directory),
            ),
            union_membership,
        )
        for path in layered.files
    ]
    deps = [t.address.spec for t in file_targets]
    lockfile_present = bool((await Get(Paths, PathGlobs([variant.lockfile]))).files)
    if lockfile_present and python_setup.enable_synthetic_lockfiles and variant.resolve in python_setup.resolves:
        deps.append(f"{variant.lockfile}:{synthetic_lockfile_target_name(variant.resolve)}")
    targets: list[Target] = [*file_targets]
    for req in layered.requirements:
        name = PipRequirement.parse(req).project_name
        targets.append(
            PythonRequirementTarget(
                {
                    **request.template,
                    PythonRequirementsField.alias: [req],
                    PythonRequirementResolveField.alias: variant.resolve,
                    Dependencies.alias: deps,
                },
                request.template_address.create_generated(name),
                union_membership,
            )
        )
    return GeneratedTargets(generator, targets)


class RequirementsDependencyError(LocalAIError):
    pass


@dataclass(frozen=True)
class RequirementsOfVariant:
    address: Address
    variant: Variant


@rule(desc="Read a variant's requirements", level=LogLevel.DEBUG)
async def requirements_of_variant(request: RequirementsOfVariant) -> LayeredRequirements:
    """Through the variant's dependency on its localai_requirements target, asking what that
    target's generator asked: one read and parse of the files."""
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, description_of_origin="<localai>"))
    direct = await Get(UnexpandedTargets, DependenciesRequest(wrapped.target[Dependencies]))
    accel, platform = request.variant.accelerator.name, request.variant.platform
    generators = [
        t for t in direct
        if isinstance(t, LocalAIRequirementsGenerator) and t[AcceleratorField].value == accel and t[PlatformField].value == platform.name
    ]
    if len(generators) != 1:
        raise RequirementsDependencyError(
            f"{request.address}: depends on {len(generators)} localai_requirements targets of accelerator "
            f"'{accel}' and platform '{platform.name}'; it needs exactly one. Fix: declare it with the localai_backend "
            f"macro, or give it dependencies=[\":requirements-{request.variant.name}\", ...]."
        )
    return await Get(LayeredRequirements, LayeredRequirementsRequest, requirements_request(generators[0], request.variant))


def rules():
    return (*collect_rules(), UnionRule(GenerateTargetsRequest, GenerateLocalAIRequirementsRequest))
