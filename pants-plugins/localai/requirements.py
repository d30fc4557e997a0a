"""LocalAI's layered requirement files, read as one requirement set per variant."""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.pip_requirement import PipRequirement
from pants.backend.python.target_types import (
    PythonRequirementResolveField,
    PythonRequirementsField,
    PythonRequirementTarget,
    parse_requirements_file,
)
from pants.engine.fs import DigestContents, PathGlobs
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import GeneratedTargets, GenerateTargetsRequest
from pants.engine.unions import UnionMembership, UnionRule
from pants.util.logging import LogLevel

from localai.target_types import LOCALAI_LAYOUT, AcceleratorField, LayoutField, LocalAIRequirementsGenerator
from localai.variant import Variant, VariantRequest


class RequirementsFileError(ValueError):
    pass


@dataclass(frozen=True)
class LocalAIRequirementsRequest:
    """Answered by localai_layout.py: a variant's requirements read LocalAI's way."""

    directory: str
    accelerator: str
    owner: str


@dataclass(frozen=True)
class LayeredRequirementsRequest:
    directory: str
    accelerator: str
    owner: str  # the target asking, for error messages
    layout: str = "backend"  # "localai": LocalAI's own folder (localai_layout.py)


@dataclass(frozen=True)
class LayeredRequirements:
    """Requirement strings, one per project, overlay pins replacing base pins."""

    requirements: tuple[str, ...]
    files: tuple[str, ...]
    # LocalAI layout only: pins the accelerator's policy replaced (one sentence each), and what
    # the policy cannot provide (the variant is then not lockable).
    replacements: tuple[str, ...] = ()
    unsatisfied: tuple[str, ...] = ()


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
    if request.layout == LOCALAI_LAYOUT:
        return await Get(LayeredRequirements, LocalAIRequirementsRequest(request.directory, request.accelerator, request.owner))
    paths = (
        f"{request.directory}/requirements.txt",
        f"{request.directory}/requirements-{request.accelerator}.txt",
    )
    contents = await Get(
        DigestContents, PathGlobs(paths)
    )
    found = {fc.path: fc.content.decode() for fc in contents}
    missing = [p for p in paths if p not in found]
    if missing:
        raise RequirementsFileError(
            f"{request.owner}: missing {', '.join(missing)}. A backend variant reads "
            f"requirements.txt (shared pins) and requirements-{request.accelerator}.txt "
            f"(this accelerator's pins; it may hold only a comment). Create the file, or remove "
            f"'{request.accelerator}' from accelerators=[...] in {request.directory}/BUILD."
        )
    try:
        reqs = layer([(p, found[p]) for p in paths])
    except ValueError as e:
        raise RequirementsFileError(f"{request.owner}: {e}") from e
    return LayeredRequirements(reqs, paths)


class GenerateLocalAIRequirementsRequest(GenerateTargetsRequest):
    generate_from = LocalAIRequirementsGenerator


@rule(desc="Generate python_requirement targets of a backend variant", level=LogLevel.DEBUG)
async def generate_localai_requirements(
    request: GenerateLocalAIRequirementsRequest, union_membership: UnionMembership
) -> GeneratedTargets:
    generator = request.generator
    variant = await Get(
        Variant, VariantRequest(generator.address, generator[AcceleratorField].value)
    )
    layered = await Get(
        LayeredRequirements,
        LayeredRequirementsRequest(
            variant.directory, variant.accelerator.name, str(generator.address), generator[LayoutField].value
        ),
    )
    targets = []
    for req in layered.requirements:
        name = PipRequirement.parse(req).project_name
        targets.append(
            PythonRequirementTarget(
                {
                    **request.template,
                    PythonRequirementsField.alias: [req],
                    PythonRequirementResolveField.alias: variant.resolve,
                },
                request.template_address.create_generated(name),
                union_membership,
            )
        )
    return GeneratedTargets(generator, targets)


def rules():
    return (*collect_rules(), UnionRule(GenerateTargetsRequest, GenerateLocalAIRequirementsRequest))
