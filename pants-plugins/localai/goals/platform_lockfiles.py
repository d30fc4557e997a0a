"""How a cross-built variant (cpu-arm64, ...) is locked (`./pants localai-platform-lockfiles`, goals/lock.py).

Pants 2.17's `generate-lockfiles` locks every resolve for the build machine (a universal lock
for Linux and macOS, resolved with an interpreter here). A variant for another platform needs a
lock for that platform only: pex's own `lock create --style=strict` for the platform's complete
platform (platforms.py), with the resolve's pip options (index isolation, as every
resolve), written with the header Pants writes, so Pants consumes it like any other (`pants
package` subsets it with `--lock` for the same complete platform). The audit (`pants lint`)
fails such a lockfile when it holds a wheel for another machine, which is what
`generate-lockfiles --resolve=<it>` would write.
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.goals.lockfile import _setup_pip_args_and_constraints_file
from pants.backend.python.pip_requirement import PipRequirement
from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.lockfile_metadata import PythonLockfileMetadata
from pants.backend.python.util_rules.pex_cli import PexCliProcess
from pants.backend.python.util_rules.pex_environment import PythonExecutable
from pants.engine.fs import Digest, DigestContents, FileContent, MergeDigests
from pants.engine.process import ProcessCacheScope, ProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.model.requirements import LayeredRequirements, RequirementsOfVariant
from localai.model.variant import BackendVariant, Variant
from localai.package.backend import complete_platforms_of


@dataclass(frozen=True)
class PlatformLockfileRequest:
    variant: BackendVariant


@dataclass(frozen=True)
class PlatformLockfile:
    file: FileContent


async def variant_python_env(variant: Variant) -> dict[str, str]:
    """The environment that makes pex re-exec under the variant's CPython: a lock builds sdists'
    metadata with the interpreter running pex, and Pants runs pex with its own CPython 3.9."""
    python = await Get(PythonExecutable, InterpreterConstraints([variant.accelerator.python]))
    return {"PEX_PYTHON": python.path}


@rule(desc="Lock a resolve for its platform", level=LogLevel.DEBUG)
async def lock_for_platform(request: PlatformLockfileRequest, python_setup: PythonSetup) -> PlatformLockfile:
    variant = request.variant.variant
    complete_platforms = await complete_platforms_of(variant)
    layered = await Get(LayeredRequirements, RequirementsOfVariant(variant.address, variant))
    pip = await _setup_pip_args_and_constraints_file(variant.resolve)
    ics = InterpreterConstraints([variant.accelerator.python])
    result = await Get(
        ProcessResult,
        PexCliProcess(
            subcommand=("lock", "create"),
            extra_args=(
                "--output=lock.json",
                "--no-emit-warnings",
                "--style=strict",
                *complete_platforms.generate_pex_arg_list(),
                "--pip-version",
                python_setup.pip_version.value,
                "--resolver-version",
                "pip-2020-resolver",
                "--indent=2",
                *pip.args,
                *layered.requirements,
            ),
            additional_input_digest=await Get(Digest, MergeDigests([pip.digest, complete_platforms.digest])),
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
        valid_for_interpreter_constraints=ics,
        requirements={PipRequirement.parse(r, description_of_origin=variant.lockfile) for r in layered.requirements},
        manylinux=pip.resolve_config.manylinux,
        requirement_constraints=set(pip.resolve_config.constraints_file.constraints) if pip.resolve_config.constraints_file else set(),
        only_binary=set(pip.resolve_config.only_binary),
        no_binary=set(pip.resolve_config.no_binary),
    )
    written = metadata.add_header_to_lockfile(lock, regenerate_command=variant.lock_command, delimeter="//")
    return PlatformLockfile(FileContent(variant.lockfile, written))


def rules():
    return collect_rules()
