"""Lockfiles written only when they can install: `./pants localai-lock` and `./pants localai-platform-lockfiles`.

pip 20.3.4 (pex's, as [python].pip_version sets it) can write a lock its own install refuses (it
locked LocalAI's rfdetr with inference 0.11.0 beside the numpy and opencv-python that inference
excludes). Pants' `generate-lockfiles` writes such a lock, and has no hook after it locks.
`localai-lock --resolve=<resolve>` asks the same lock of the same rules (the Python backend's
GeneratePythonLockfile for a build-machine variant: the bytes `generate-lockfiles` writes;
goals/pex_lock.py for a cross-built one or one with BUILD `exclude`), checks it (model/lock_consistency.py) and
writes only the locks that pass; `localai-platform-lockfiles` does the same for every cross-built
variant (or the named ones). A lock that fails is printed with each requirement it breaks and
the fix, and the lockfile already in the repository stays as it was.
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.goals.lockfile import GeneratePythonLockfile, RequestedPythonUserResolveNames
from pants.core.goals.generate_lockfiles import GenerateLockfileResult, UserGenerateLockfiles
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule, rule
from pants.option.option_types import StrListOption
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.goals.pex_lock import PexLock, PexLockRequest
from localai.model.lockfile import Lockfile
from localai.model.variant import AllBackendVariants, BackendVariant, inconsistent_lock_message


class LockGoalError(LocalAIError):
    pass


class LockSubsystem(GoalSubsystem):
    name = "localai-lock"
    help = (
        "Generate variants' lockfiles as `generate-lockfiles` does (a cross-built one as "
        "`localai-platform-lockfiles` does), writing each only if it can install what it was locked for."
    )

    resolve = StrListOption(help="The resolves to lock (e.g. localai-rfdetr-cpu); required: each is minutes of pip.")


class LockGoal(Goal):
    subsystem_cls = LockSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


class PlatformLockfilesSubsystem(GoalSubsystem):
    name = "localai-platform-lockfiles"
    help = "Generate the lockfiles of cross-built variants (another platform than the build machine's)."

    resolve = StrListOption(help="Only these resolves (e.g. rerankers-cpu-arm64); default: every cross-built variant's.")


class PlatformLockfilesGoal(Goal):
    subsystem_cls = PlatformLockfilesSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


def variants_to_lock(variants: AllBackendVariants, wanted: tuple[str, ...]) -> tuple[BackendVariant, ...]:
    """The variants of the named resolves; an error naming what cannot be locked here, and why."""
    if not wanted:
        raise LockGoalError("localai-lock: name the resolves to lock, e.g. `./pants localai-lock --resolve=localai-rfdetr-cpu`.")
    by_resolve = {v.variant.resolve: v for v in variants}
    unknown = sorted(set(wanted) - set(by_resolve))
    if unknown:
        raise LockGoalError(
            f"--localai-lock-resolve names {', '.join(unknown)}, not the resolve of a backend variant. "
            f"Fix: name a resolve that `./pants localai-resolves` declares for a variant (pants.toml [python.resolves])."
        )
    todo = tuple(by_resolve[r] for r in sorted(set(wanted)))
    unlockable = [f"{bv.address}: {bv.why_unlocked}" for bv in todo if bv.not_lockable_here or bv.variant.accelerator.lock_note]
    if unlockable:
        raise LockGoalError("localai-lock: not lockable here:\n  " + "\n  ".join(unlockable))
    return todo


def cross_variants(variants: AllBackendVariants, wanted: tuple[str, ...]) -> tuple[BackendVariant, ...]:
    cross = {v.variant.resolve: v for v in variants if v.variant.platform.cross}
    unknown = sorted(set(wanted) - set(cross))
    if unknown:
        raise LockGoalError(
            f"--localai-platform-lockfiles-resolve names {', '.join(unknown)}, not the resolve of a cross-built variant. "
            f"Those are: {', '.join(sorted(cross)) or 'none'}; lock the build machine's with `./pants localai-lock`."
        )
    return tuple(cross[r] for r in sorted(wanted or cross))


@dataclass(frozen=True)
class VariantLockRequest:
    variant: BackendVariant


@dataclass(frozen=True)
class VariantLock:
    file: FileContent
    broken: tuple[str, ...]  # the requirements the lock breaks (model/lock_consistency.py)


@rule(desc="Lock a backend variant", level=LogLevel.DEBUG)
async def lock_variant(request: VariantLockRequest) -> VariantLock:
    variant = request.variant.variant
    if variant.platform.cross or request.variant.exclude:  # what `generate-lockfiles` cannot ask (goals/pex_lock.py)
        file = (await Get(PexLock, PexLockRequest(request.variant))).file
    else:
        # What `generate-lockfiles --resolve=<it>` asks: the same request, the same rule, the same bytes.
        (lock_request,) = await Get(UserGenerateLockfiles, RequestedPythonUserResolveNames([variant.resolve]))
        assert isinstance(lock_request, GeneratePythonLockfile)
        result = await Get(GenerateLockfileResult, GeneratePythonLockfile, lock_request)
        (file,) = await Get(DigestContents, Digest, result.digest)
    return VariantLock(file, variant.unsatisfied_by(Lockfile.of(file.path, file.content)))


async def write_checked(console: Console, workspace: Workspace, todo: tuple[BackendVariant, ...]) -> int:
    """Locks ``todo``, writes the locks that can install, names the others; the exit code."""
    for bv in todo:
        console.print_stderr(f"Locking {bv.variant.resolve} for {bv.variant.platform.name} ...")
    locks = await MultiGet(Get(VariantLock, VariantLockRequest(bv)) for bv in todo)
    for bv, lock in zip(todo, locks):
        if lock.broken:
            console.print_stderr(f"{inconsistent_lock_message(bv.variant, lock.broken)}\nNot written: {bv.variant.lockfile} is unchanged.")
    good = [lock.file for lock in locks if not lock.broken]
    workspace.write_digest(await Get(Digest, CreateDigest(good)))
    for f in good:
        console.print_stdout(f"Wrote {f.path}")
    return 1 if len(good) < len(locks) else 0


@goal_rule
async def lock_variants(console: Console, workspace: Workspace, subsystem: LockSubsystem, variants: AllBackendVariants) -> LockGoal:
    return LockGoal(exit_code=await write_checked(console, workspace, variants_to_lock(variants, tuple(subsystem.resolve))))


@goal_rule
async def generate_platform_lockfiles(
    console: Console, workspace: Workspace, subsystem: PlatformLockfilesSubsystem, variants: AllBackendVariants
) -> PlatformLockfilesGoal:
    todo = cross_variants(variants, tuple(subsystem.resolve))
    if not todo:
        console.print_stdout("No cross-built variant is declared (localai_backend(arm64=[...])).")
        return PlatformLockfilesGoal(exit_code=0)
    return PlatformLockfilesGoal(exit_code=await write_checked(console, workspace, todo))


def rules():
    return collect_rules()
