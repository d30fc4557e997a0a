"""`./pants localai-platform-lockfiles`: the lockfiles of cross-built variants (cpu-arm64, ...).

Pants 2.17's `generate-lockfiles` locks every resolve for the build machine (a universal lock
for Linux and macOS, resolved with an interpreter here). A variant for another platform needs a
lock for that platform only: this goal runs pex's own `lock create --style=strict` for the
platform's complete platform (model/platforms.py), with the resolve's pip options (index
isolation, as every resolve), and writes it with the header Pants writes, so Pants consumes it
like any other (`pants package` subsets it with `--lock` for the same complete platform). The
audit (`pants lint`) fails such a lockfile when it holds a wheel for another machine, which is
what `generate-lockfiles --resolve=<it>` would write. A lock whose own install would refuse it
(model/lock_consistency.py) is an error here, and nothing is written.
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.goals.lockfile import _setup_pip_args_and_constraints_file
from pants.backend.python.pip_requirement import PipRequirement
from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.lockfile_metadata import PythonLockfileMetadata
from pants.backend.python.util_rules.pex_cli import PexCliProcess
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, MergeDigests, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.process import ProcessCacheScope, ProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule, rule
from pants.option.option_types import StrListOption
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.lockfile import Lockfile
from localai.model.requirements import LayeredRequirements, RequirementsOfVariant
from localai.model.variant import AllBackendVariants, BackendVariant, inconsistent_lock_message
from localai.package.backend import complete_platforms_of
from localai.package.cross_downloads import variant_python_env


class PlatformLockfileError(LocalAIError):
    pass


class PlatformLockfilesSubsystem(GoalSubsystem):
    name = "localai-platform-lockfiles"
    help = "Generate the lockfiles of cross-built variants (another platform than the build machine's)."

    resolve = StrListOption(help="Only these resolves (e.g. rerankers-cpu-arm64); default: every cross-built variant's.")


class PlatformLockfilesGoal(Goal):
    subsystem_cls = PlatformLockfilesSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


def cross_variants(variants: AllBackendVariants, wanted: tuple[str, ...]) -> tuple[BackendVariant, ...]:
    cross = {v.variant.resolve: v for v in variants if v.variant.platform.cross}
    unknown = sorted(set(wanted) - set(cross))
    if unknown:
        raise PlatformLockfileError(
            f"--localai-platform-lockfiles-resolve names {', '.join(unknown)}, not the resolve of a cross-built variant. "
            f"Those are: {', '.join(sorted(cross)) or 'none'}; lock the build machine's with `./pants generate-lockfiles`."
        )
    return tuple(cross[r] for r in sorted(wanted or cross))


@dataclass(frozen=True)
class PlatformLockfileRequest:
    variant: BackendVariant


@dataclass(frozen=True)
class PlatformLockfile:
    file: FileContent


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
    # pex writes a lock its own install may refuse: refused here, before any file is written.
    broken = variant.unsatisfied_by(Lockfile.of(variant.lockfile, written))
    if broken:
        raise PlatformLockfileError(inconsistent_lock_message(variant, broken))
    return PlatformLockfile(FileContent(variant.lockfile, written))


@goal_rule
async def generate_platform_lockfiles(
    console: Console, workspace: Workspace, subsystem: PlatformLockfilesSubsystem, variants: AllBackendVariants
) -> PlatformLockfilesGoal:
    todo = cross_variants(variants, tuple(subsystem.resolve))
    if not todo:
        console.print_stdout("No cross-built variant is declared (localai_backend(arm64=[...])).")
        return PlatformLockfilesGoal(exit_code=0)
    for bv in todo:
        console.print_stderr(f"Locking {bv.variant.resolve} for {bv.variant.platform.name} ({bv.variant.platform.complete_platform}) ...")
    locks = await MultiGet(Get(PlatformLockfile, PlatformLockfileRequest(bv)) for bv in todo)
    files = [lock.file for lock in locks]
    workspace.write_digest(await Get(Digest, CreateDigest(files)))
    for f in files:
        console.print_stdout(f"Wrote {f.path}")
    return PlatformLockfilesGoal(exit_code=0)


def rules():
    return collect_rules()
