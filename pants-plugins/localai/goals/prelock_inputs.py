"""What a prelocked variant's pins are resolved from, read where `generate-lockfiles` reads it.

The requirements and interpreter constraints come from Pants' own rule that builds the
`generate-lockfiles` request of a resolve (pants/backend/python/goals/lockfile.py), so uv sees
exactly what pex will lock; the pip options are the variant's own file's options
(goals/resolves.py option_lines), the indexes and find-links `[python-repos]`'s. Their sha256
(model/prelock.py inputs_digest) is recorded in the pins block and rechecked by `pants lint`.
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.goals.lockfile import GeneratePythonLockfile, RequestedPythonUserResolveNames
from pants.backend.python.subsystems.repos import PythonRepos
from pants.backend.python.subsystems.setup import PythonSetup
from pants.core.goals.generate_lockfiles import UserGenerateLockfiles
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.prelock import inputs_digest

# uv's --python-platform for the build machine's platform (platforms.py BUILD_PLATFORM):
# manylinux_2_28, the tag of the wheelhouse's torch, so no pin needs a newer glibc than it does.
UV_PLATFORM = "x86_64-manylinux_2_28"


class PrelockInputsError(LocalAIError):
    pass


@dataclass(frozen=True)
class PrelockInputsRequest:
    resolve: str
    pip_options: tuple[str, ...]  # the option lines of the variant's own pip options file


@dataclass(frozen=True)
class PrelockInputs:
    resolve: str
    requirements: tuple[str, ...]
    pip_options: tuple[str, ...]
    indexes: tuple[str, ...]
    find_links: tuple[str, ...]
    python: str  # "3.11": the lowest version the resolve's interpreter constraints allow
    platform: str = UV_PLATFORM

    @property
    def digest(self) -> str:
        return inputs_digest(
            requirements=self.requirements,
            pip_options=self.pip_options,
            indexes=self.indexes,
            find_links=self.find_links,
            python=self.python,
            platform=self.platform,
        )


@rule(desc="Read what a prelocked resolve is resolved from", level=LogLevel.DEBUG)
async def prelock_inputs(request: PrelockInputsRequest, python_setup: PythonSetup, repos: PythonRepos) -> PrelockInputs:
    generate = await Get(UserGenerateLockfiles, RequestedPythonUserResolveNames((request.resolve,)))
    lock = next((g for g in generate if isinstance(g, GeneratePythonLockfile)), None)
    if lock is None or not lock.requirements:
        raise PrelockInputsError(
            f"the resolve {request.resolve} has no requirements to resolve (no python_requirement names it). "
            f"Fix: run `./pants localai-resolves` and check the variant's requirement files."
        )
    python = lock.interpreter_constraints.minimum_python_version(python_setup.interpreter_versions_universe)
    if python is None:
        raise PrelockInputsError(
            f"the resolve {request.resolve}: its interpreter constraints ({lock.interpreter_constraints}) name no "
            f"Python version uv can resolve for. Fix: [python].resolves_to_interpreter_constraints in pants.toml."
        )
    return PrelockInputs(
        request.resolve,
        tuple(sorted(lock.requirements)),
        request.pip_options,
        tuple(repos.indexes),
        tuple(repos.find_links),
        python,
    )


def rules():
    return collect_rules()
