"""What a backend variant is made of: its backend, accelerator, resolve and lockfile.

Naming is fixed (backends/<name>:<accel> -> resolve <name>-<accel> -> lockfiles/<name>-<accel>.lock;
backends/localai/<name>:<accel> -> resolve localai-<name>-<accel>;
pip options from the accelerator), so pants.toml only has to agree; these rules check that it
does and say exactly what to add when it does not.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from pants.backend.python.subsystems.setup import PythonSetup
from pants.engine.addresses import Address
from pants.engine.rules import Get, collect_rules, rule

from localai.accelerators import Accelerator, AcceleratorMatrix


class VariantConfigError(ValueError):
    pass


@dataclass(frozen=True)
class VariantRequest:
    address: Address
    accelerator: str


@dataclass(frozen=True)
class Variant:
    address: Address
    backend: str
    accelerator: Accelerator

    @property
    def directory(self) -> str:
        return self.address.spec_path

    @property
    def resolve(self) -> str:
        return resolve_name(self.backend, self.accelerator.name)

    @property
    def lockfile(self) -> str:
        return f"lockfiles/{self.resolve}.lock"


def backend_name(directory: str) -> str:
    """backends/<name> -> <name>; deeper folders join their path under backends/ with '-'
    (LocalAI's folders imported into backends/localai/<name> -> localai-<name>)."""
    path = PurePath(directory)
    if path.parts[:1] == ("backends",) and len(path.parts) > 1:
        return "-".join(path.parts[1:])
    return path.name


def resolve_name(backend: str, accelerator: str) -> str:
    return f"{backend}-{accelerator}"


def pants_toml_lines(backend: str, accelerator: Accelerator) -> str:
    resolve = resolve_name(backend, accelerator.name)
    return (
        f'  [python.resolves]                    "{resolve}" = "lockfiles/{resolve}.lock"\n'
        f'  [python.resolves_to_constraints_file] "{resolve}" = "{accelerator.pip_options}"'
    )


@rule
async def resolve_variant(request: VariantRequest, python_setup: PythonSetup) -> Variant:
    matrix = await Get(AcceleratorMatrix)
    accel = matrix.get(request.accelerator, context=f"{request.address.spec_path}/BUILD ({request.address})")
    variant = Variant(request.address, backend_name(request.address.spec_path), accel)
    problems = []
    lockfile = python_setup.resolves.get(variant.resolve)
    if lockfile != variant.lockfile:
        problems.append(f"[python.resolves] maps it to {lockfile!r}" if lockfile else "[python.resolves] lacks it")
    pip_options = python_setup.resolves_to_constraints_file(()).get(variant.resolve)
    if pip_options != accel.pip_options:
        problems.append(
            f"[python.resolves_to_constraints_file] gives {pip_options!r}, not the accelerator's "
            f"pip options {accel.pip_options!r} (index isolation)"
        )
    if problems:
        raise VariantConfigError(
            f"{request.address}: pants.toml does not declare the resolve '{variant.resolve}' as "
            f"this variant needs: {'; '.join(problems)}. Add these entries to pants.toml:\n"
            + pants_toml_lines(variant.backend, accel)
        )
    return variant


def rules():
    return collect_rules()
