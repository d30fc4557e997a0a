"""A variant's build inputs, gathered by one rule: what packaging, the PEX and the audit read.

The variant and its lock (`BackendVariant`), its layered requirements and those the PEX carries,
its interpreter constraints and its assembled sources, each checked once, before anything is built.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from pants.backend.python.pip_requirement import PipRequirement
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.engine.addresses import Address
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.layout import Layout
from localai.model.lockfile import Lockfile
from localai.model.requirements import LayeredRequirements, RequirementsOfVariant
from localai.model.variant import BackendVariant, BackendVariantRequest, PinPolicyError, Variant
from localai.package.sources import BackendSources, BackendSourcesRequest

# Needed to compile backend.proto at build time, not at run time: kept out of the PEX.
BUILD_ONLY_REQUIREMENT = "grpcio-tools"


class GrpcToolsMissingError(LocalAIError):
    pass


class ExtraIndexMismatchError(LocalAIError):
    pass


def check_extra_indexes(variant: Variant, layered: LayeredRequirements) -> None:
    """The indexes its resolve sees (BUILD's extra_indexes -> its pip options) are the ones its
    requirement files name and [localai.overrides.<folder>] declares: else the BUILD file is stale."""
    if layered.extra_indexes == variant.extra_indexes:
        return
    raise ExtraIndexMismatchError(
        f"{variant.address}: its requirement files name the extra indexes [{', '.join(layered.extra_indexes)}] "
        f"(declared in [localai.overrides.{PurePath(variant.directory).name}] of 3rdparty/accelerators.toml), but "
        f"{variant.directory}/BUILD gives its resolve [{', '.join(variant.extra_indexes)}] ({variant.pip_options}). "
        f"Fix: run `./pants localai-import {PurePath(variant.directory).parent}`, then "
        f"`./pants generate-lockfiles --resolve={variant.resolve}`."
    )


def runtime_requirements(variant: Variant, layered: LayeredRequirements, layout: Layout) -> tuple[str, ...]:
    """The variant's requirements the PEX carries; refuses what cannot be packaged, naming the fix.
    An imported LocalAI folder's stubs come from the `grpc-stubs` resolve, so it needs no grpcio-tools
    (a grpcio-tools line of its own is locked as LocalAI installs it, and kept out of the PEX too)."""
    if layered.unsatisfied:
        raise PinPolicyError(
            f"{variant.address}: the {variant.accelerator.name} variant cannot be built here: " + "; ".join(layered.unsatisfied)
        )
    by_name = {PipRequirement.parse(r).project_name.lower(): r for r in layered.requirements}
    if BUILD_ONLY_REQUIREMENT not in by_name and layout.pins_grpcio_tools:
        raise GrpcToolsMissingError(
            f"{variant.address}: {variant.directory}/requirements.txt must pin grpcio-tools (the "
            "build compiles backend.proto with it, from the same lock as grpcio/protobuf)."
        )
    return tuple(r for name, r in by_name.items() if name != BUILD_ONLY_REQUIREMENT)


@dataclass(frozen=True)
class VariantInputsRequest:
    address: Address


@dataclass(frozen=True)
class VariantInputs:
    backend_variant: BackendVariant
    lockfile: Lockfile  # checked: the audit would not refuse what it builds
    layered: LayeredRequirements
    requirements: tuple[str, ...]  # what the PEX carries (runtime_requirements)
    interpreter_constraints: InterpreterConstraints
    sources: BackendSources
    exclude: tuple[str, ...] = ()  # BUILD `exclude`: the projects pex leaves out (`--exclude`)

    @property
    def variant(self) -> Variant:
        return self.backend_variant.variant


@rule(desc="Gather a backend variant's build inputs", level=LogLevel.DEBUG)
async def variant_inputs(request: VariantInputsRequest) -> VariantInputs:
    backend_variant = await Get(BackendVariant, BackendVariantRequest(request.address))
    variant = backend_variant.variant
    lockfile = backend_variant.packageable_lock()  # refuses, before anything is built, a lock the audit refuses
    layered = await Get(LayeredRequirements, RequirementsOfVariant(request.address, variant))
    check_extra_indexes(variant, layered)
    requirements = runtime_requirements(variant, layered, backend_variant.layout)
    ics = InterpreterConstraints([variant.accelerator.python])
    sources = await Get(BackendSources, BackendSourcesRequest(variant, ics, backend_variant.layout))
    return VariantInputs(backend_variant, lockfile, layered, requirements, ics, sources, backend_variant.exclude)


def rules():
    return collect_rules()
