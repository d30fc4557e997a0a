"""What a backend variant is made of: its backend, accelerator, resolve and lockfile.

`Variant` is the naming (address, backend, accelerator -> resolve, lockfile path), also asked
for by the requirements generator; `BackendVariant` is a `localai_backend_variant` target as
every goal sees it: the naming, the target's settings and the lockfile or why there is none.
Status, gallery, export, CI matrix, audit and packaging all read variants through
`BackendVariants` / `AllBackendVariants`, never by testing target fields themselves.

Naming is fixed (backends/<name>:<accel> -> resolve <name>-<accel> -> lockfiles/<name>-<accel>.lock;
a cross-built platform's suffix follows the accelerator: :cpu-arm64 -> <name>-cpu-arm64;
backends/localai/<name>:<accel> -> resolve localai-<name>-<accel>;
pip options from the accelerator, or for an imported folder's variant that names an index of its
own, `extra_indexes`, a file of its own: 3rdparty/accelerators/variants/<resolve>.txt). pants.toml's entries are generated from it (resolves.py,
`./pants localai-resolves`); these rules check that they agree.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from packaging.utils import canonicalize_name  # pants: no-infer-dep (packaging comes with pantsbuild.pants)
from pants.backend.python.subsystems.setup import PythonSetup
from pants.engine.addresses import Address
from pants.engine.collection import Collection
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import AllTargets, Target, WrappedTarget, WrappedTargetRequest
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.accelerators import Accelerator, AcceleratorMatrix, python_version_of
from localai.model.layout import LAYOUTS, Layout
from localai.model.lock_consistency import unsatisfied
from localai.model.lockfile import Lockfile, LockfileRequest, MaybeLockfile
from localai.platforms import BUILD_PLATFORM, PLATFORMS, TargetPlatform, platform_named
from localai.target_types import (
    AcceleratorField,
    ExcludeField,
    ExemptField,
    ExtraIndexesField,
    HostLibsField,
    LayoutField,
    NotLockableHereField,
    PlatformField,
    PrelockField,
    SizeBudgetField,
    VersionField,
)

# Pip options files of single variants (an imported folder's own index, a prelocked variant's
# exact pins): generated, goals/resolves.py.
VARIANT_PIP_OPTIONS_DIR = "3rdparty/accelerators/variants"


class VariantConfigError(LocalAIError):
    pass


class MissingLockfileError(LocalAIError):
    pass


class ForbiddenPackageError(LocalAIError):
    pass


class InconsistentLockError(LocalAIError):
    pass


class PinPolicyError(LocalAIError):
    """The accelerator's pin policy cannot satisfy a backend's requirement files."""


@dataclass(frozen=True)
class VariantRequest:
    address: Address
    accelerator: str
    platform: str = BUILD_PLATFORM
    extra_indexes: tuple[str, ...] = ()
    prelock: bool = False


@dataclass(frozen=True)
class Variant:
    address: Address
    backend: str
    accelerator: Accelerator
    platform: TargetPlatform = PLATFORMS[BUILD_PLATFORM]
    # Indexes of its own (an imported folder's, [localai.overrides.<folder>] extra_indexes), seen
    # by its resolve alone, through pip_options.
    extra_indexes: tuple[str, ...] = ()
    # Resolved by uv first (goals/prelock.py): its own pip options file carries exact pins.
    prelock: bool = False

    @classmethod
    def of(
        cls,
        address: Address,
        accelerator: Accelerator,
        platform: TargetPlatform = PLATFORMS[BUILD_PLATFORM],
        extra_indexes: tuple[str, ...] = (),
        prelock: bool = False,
    ) -> "Variant":
        return cls(address, backend_name(address.spec_path), accelerator, platform, tuple(extra_indexes), prelock)

    @property
    def directory(self) -> str:
        return self.address.spec_path

    @classmethod
    def of_target(cls, tgt: Target, matrix: AcceleratorMatrix) -> "Variant":
        """The naming of a variant or requirements target, from its accelerator and platform fields."""
        context = f"{tgt.address.spec_path}/BUILD ({tgt.address})"
        accel = matrix.get(tgt[AcceleratorField].value, context=context)
        return cls.of(
            tgt.address,
            accel,
            platform_named(tgt[PlatformField].value, context=context),
            tuple(tgt.get(ExtraIndexesField).value or ()),
            bool(tgt.get(PrelockField).value),
        )

    @property
    def name(self) -> str:
        return variant_name(self.accelerator.name, self.platform)

    @property
    def platforms(self) -> tuple[str, ...]:
        """Where its artifacts run: a cross-built variant's platform, else the accelerator's
        platforms that are not cross-built (those have variants of their own)."""
        if self.platform.cross:
            return (self.platform.name,)
        return tuple(p for p in self.accelerator.platforms if not (p in PLATFORMS and PLATFORMS[p].cross))

    @property
    def resolve(self) -> str:
        return resolve_name(self.backend, self.name)

    @property
    def tool_resolve(self) -> str:
        """The resolve of the same backend and accelerator on the build machine's platform: a
        cross build's grpcio-tools, which runs here, comes from it when it is locked
        (package/sources.py stubs_tool_resolve)."""
        return resolve_name(self.backend, self.accelerator.name)

    @property
    def folder(self) -> str:
        return folder_path(self.backend, self.name)

    @property
    def entry(self) -> str:
        return entry_name(self.backend, self.name)

    @property
    def lockfile(self) -> str:
        return lockfile_path(self.resolve)

    def unsatisfied_by(self, lockfile: Lockfile) -> tuple[str, ...]:
        """The requirements `lockfile` breaks on this variant's machine and CPython (model/lock_consistency.py)."""
        return unsatisfied(lockfile, self.platform.machine, python_version_of(self.accelerator.python))

    @property
    def pip_options(self) -> str:
        """Its resolve's pip options file: the accelerator's, or one of its own when it has extra
        indexes or is prelocked."""
        return pip_options_path(self.accelerator.pip_options, self.resolve, self.extra_indexes, self.prelock)


def variant_name(accelerator: str, platform: TargetPlatform) -> str:
    """The accelerator, then the platform's suffix: cpu, cuda13, cpu-arm64."""
    return accelerator + platform.suffix


def folder_path(backend: str, accelerator: str) -> str:
    """The LocalAI backend folder of a variant, under dist/."""
    return f"backends/{backend}/{accelerator}"


def entry_name(backend: str, accelerator: str) -> str:
    """LocalAI's naming of concrete gallery entries and image titles: `<build>-<backend>` (cpu-diffusers)."""
    return f"{accelerator}-{backend}"


def lockfile_path(resolve: str) -> str:
    return f"lockfiles/{resolve}.lock"


def pip_options_path(accelerator_pip_options: str, resolve: str, extra_indexes: tuple[str, ...] = (), prelock: bool = False) -> str:
    """The accelerator's pip options file; a resolve with indexes of its own has its own file
    (the accelerator's options plus those indexes), so no other resolve sees them, and so has a
    prelocked one (plus its exact pins, which are no other resolve's)."""
    return f"{VARIANT_PIP_OPTIONS_DIR}/{resolve}.txt" if extra_indexes or prelock else accelerator_pip_options


def backend_name(directory: str) -> str:
    """backends/<name> -> <name>; deeper folders join their path under backends/ with '-'
    (LocalAI's folders imported into backends/localai/<name> -> localai-<name>)."""
    path = PurePath(directory)
    if path.parts[:1] == ("backends",) and len(path.parts) > 1:
        return "-".join(path.parts[1:])
    return path.name


def resolve_name(backend: str, accelerator: str) -> str:
    return f"{backend}-{accelerator}"


@rule
async def resolve_variant(request: VariantRequest, python_setup: PythonSetup) -> Variant:
    matrix = await Get(AcceleratorMatrix)
    context = f"{request.address.spec_path}/BUILD ({request.address})"
    accel = matrix.get(request.accelerator, context=context)
    variant = Variant.of(
        request.address, accel, platform_named(request.platform, context=context), request.extra_indexes, request.prelock
    )
    if variant.platform.cross and variant.platform.name not in accel.platforms:
        raise VariantConfigError(
            f"{context}: the {accel.name} accelerator has no {variant.platform.name} builds (its platforms in "
            f"3rdparty/accelerators.toml: {', '.join(accel.platforms)}). Fix: drop the variant, or add the platform there."
        )
    if variant.prelock and variant.platform.cross:
        raise VariantConfigError(
            f"{context}: prelock is set on a cross-built ({variant.platform.name}) variant; its lock comes from "
            f"goals/pex_lock.py, not from `generate-lockfiles`, which the uv pins feed. Fix: drop prelock for it."
        )
    problems = []
    lockfile = python_setup.resolves.get(variant.resolve)
    if lockfile != variant.lockfile:
        problems.append(f"[python.resolves] maps it to {lockfile!r}" if lockfile else "[python.resolves] lacks it")
    pip_options = python_setup.resolves_to_constraints_file(()).get(variant.resolve)
    if pip_options != variant.pip_options:
        whose = (
            f"its own pip options (the accelerator's plus {', '.join(variant.extra_indexes) or 'exact pins'})"
            if variant.pip_options != accel.pip_options
            else "the accelerator's pip options"
        )
        problems.append(
            f"[python.resolves_to_constraints_file] gives {pip_options!r}, not {whose} "
            f"{variant.pip_options!r} (index isolation)"
        )
    if problems:
        raise VariantConfigError(
            f"{request.address}: pants.toml does not declare the resolve '{variant.resolve}' as "
            f"this variant needs: {'; '.join(problems)}. Fix: run `./pants localai-resolves`, which "
            f"writes the entries of every variant the BUILD files declare:\n"
            f'  [python.resolves]                    "{variant.resolve}" = "{variant.lockfile}"\n'
            f'  [python.resolves_to_constraints_file] "{variant.resolve}" = "{variant.pip_options}"'
        )
    return variant


def is_backend_variant(tgt: Target) -> bool:
    return tgt.has_field(AcceleratorField) and tgt.has_field(NotLockableHereField)


@dataclass(frozen=True)
class BackendVariant:
    variant: Variant
    version: str
    size_budget_mb: int  # the target's budget, else the accelerator's
    layout: Layout
    lockfile: Lockfile | None
    not_lockable_here: str | None  # the target's reason, if it gives one
    # project -> why: forbidden projects this variant may hold (an imported folder's, BUILD `exempt`)
    exempt: FrozenDict[str, str] = FrozenDict()
    # locked projects its artifact leaves out, with what only they need (BUILD `exclude`)
    exclude: tuple[str, ...] = ()
    # soname -> why: non-GPU libraries its ELF files NEED of the host (BUILD `host_libs`)
    host_libs: FrozenDict[str, str] = FrozenDict()

    @property
    def address(self) -> Address:
        return self.variant.address

    @property
    def lock_command(self) -> str:
        """The command that (re)generates its lockfile: a cross-built variant's is locked for its
        platform alone, one with `exclude` with pex's `--exclude` (goals/pex_lock.py), which Pants'
        `generate-lockfiles` cannot pass; `localai-lock` (goals/lock.py) checks any before writing."""
        v = self.variant
        goal = "localai-platform-lockfiles" if v.platform.cross else "localai-lock" if self.exclude else "generate-lockfiles"
        return f"./pants {goal} --resolve={v.resolve}"

    @property
    def why_unlocked(self) -> str:
        """Why there is no lockfile: the target's reason, the accelerator's, or how to make it."""
        return (
            self.not_lockable_here
            or self.variant.accelerator.lock_note
            or f"not generated yet: `{self.lock_command}`"
        )

    def locked(self) -> Lockfile:
        """The lockfile, or an error naming the target, the cause and the fix."""
        if self.lockfile is None:
            v = self.variant
            raise MissingLockfileError(
                f"{v.address}: {v.lockfile} does not exist, so this variant cannot be built.\n"
                f"  Why: {self.why_unlocked}.\n  Fix: on a machine that reaches PyPI and "
                f"{v.accelerator.index}, run\n    {self.lock_command}\n"
                f"  and commit {v.lockfile}."
            )
        return self.lockfile

    def forbidden_locked(self) -> tuple[str, ...]:
        """The lockfile's packages the accelerator forbids: what the audit (`pants lint`) fails
        the lockfile for, and what `pants package` refuses to build (one check, both goals); its
        exempt projects are not among them."""
        if not self.lockfile:
            return ()
        return self.variant.accelerator.forbidden_in(self.lockfile.versions(), self.exempt)

    def exclusion_mismatch(self) -> str | None:
        """Why the lockfile was not locked for BUILD `exclude`, or None when it was: pex's `lock create
        --exclude` records the projects it left out; a lock `generate-lockfiles` wrote holds them."""
        if not self.lockfile:
            return None
        locked_without = {canonicalize_name(e) for e in self.lockfile.excluded()}
        if locked_without == {canonicalize_name(e) for e in self.exclude}:
            return None
        v = self.variant
        locked = f"was locked excluding {sorted(locked_without)}" if locked_without else (
            "was locked excluding nothing (as `generate-lockfiles` locks)"
        )
        return f"{v.address}: {v.lockfile} {locked}, but BUILD `exclude` names {sorted(self.exclude)}. Fix: `{self.lock_command}`."

    def unsatisfied_locked(self) -> tuple[str, ...]:
        """The requirements the lockfile breaks on the variant's platform: what the audit fails it
        for and `pants package` refuses, before pex would."""
        return self.variant.unsatisfied_by(self.lockfile) if self.lockfile else ()

    def packageable_lock(self) -> Lockfile:
        """The lockfile, refused when the audit would refuse the artifact built from it."""
        lock, bad, broken, mismatch = self.locked(), self.forbidden_locked(), self.unsatisfied_locked(), self.exclusion_mismatch()
        if mismatch:
            raise InconsistentLockError(mismatch)
        if broken:
            raise InconsistentLockError(inconsistent_lock_message(self.variant, broken))
        if bad:
            v = self.variant
            raise ForbiddenPackageError(
                f"{v.address}: {v.lockfile} locks {', '.join(bad)}, which the {v.accelerator.name} "
                f"accelerator forbids ({', '.join(v.accelerator.forbidden)} in 3rdparty/accelerators.toml), "
                f"so the artifact would fail the audit (`pants lint`). Fix: find the requirement that pulls "
                f"{bad[0]} (`./pants localai-import --report`) and replace or drop it for {v.accelerator.name}, "
                f"or declare the variant not_lockable_here with the reason; then regenerate the lockfile."
            )
        return lock


def inconsistent_lock_message(variant: Variant, broken: tuple[str, ...]) -> str:
    lines = "".join(f"\n  {line}" for line in broken)
    # Cross-built variants cannot be prelocked (goals/prelock.py).
    uv = "" if variant.platform.cross else (
        ", or resolve the variant with uv first (`prelock`: docs/localai-import.md)"
    )
    return (
        f"{variant.address}: {variant.lockfile} cannot install what it was locked for on {variant.platform.name}:{lines}\n"
        f"Fix: pip 20.3.4 (pex's, [python].pip_version) can lock a set its own install refuses. Bound the named project in the "
        f"requirements{uv}, then `./pants localai-lock --resolve={variant.resolve}` (it writes the lock only if it can install)."
    )


@dataclass(frozen=True)
class BackendVariantRequest:
    address: Address


class BackendVariants(Collection[BackendVariant]):
    """Backend variants sorted by address."""

    def locked(self) -> tuple[BackendVariant, ...]:
        return tuple(v for v in self if v.lockfile is not None)

    def unlocked(self) -> tuple[BackendVariant, ...]:
        return tuple(v for v in self if v.lockfile is None)


@dataclass(frozen=True)
class BackendVariantsRequest:
    """The backend variants among these addresses (other targets are ignored)."""

    addresses: tuple[Address, ...]


class AllBackendVariants(BackendVariants):
    pass


@rule(desc="Read a backend variant", level=LogLevel.DEBUG)
async def backend_variant(request: BackendVariantRequest) -> BackendVariant:
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, description_of_origin="<localai>"))
    tgt = wrapped.target
    variant = await Get(
        Variant,
        VariantRequest(
            tgt.address,
            tgt[AcceleratorField].value,
            tgt[PlatformField].value,
            tuple(tgt.get(ExtraIndexesField).value or ()),
            bool(tgt.get(PrelockField).value),
        ),
    )
    maybe = await Get(MaybeLockfile, LockfileRequest(variant.lockfile))
    return BackendVariant(
        variant=variant,
        version=tgt[VersionField].value,
        size_budget_mb=tgt[SizeBudgetField].value or variant.accelerator.size_budget_mb,
        layout=LAYOUTS[tgt[LayoutField].value],
        lockfile=maybe.lockfile,
        not_lockable_here=tgt[NotLockableHereField].value,
        exempt=FrozenDict(sorted((tgt.get(ExemptField).value or {}).items())),
        exclude=tuple(sorted(tgt.get(ExcludeField).value or ())),
        host_libs=FrozenDict(sorted((tgt.get(HostLibsField).value or {}).items())),
    )


@rule(desc="Read backend variants", level=LogLevel.DEBUG)
async def backend_variants(request: BackendVariantsRequest) -> BackendVariants:
    wrapped = await MultiGet(
        Get(WrappedTarget, WrappedTargetRequest(a, description_of_origin="<localai>")) for a in request.addresses
    )
    addresses = sorted({w.target.address for w in wrapped if is_backend_variant(w.target)}, key=lambda a: a.spec)
    return BackendVariants(await MultiGet(Get(BackendVariant, BackendVariantRequest(a)) for a in addresses))


@rule(desc="Read every backend variant", level=LogLevel.DEBUG)
async def all_backend_variants(all_targets: AllTargets) -> AllBackendVariants:
    addresses = tuple(t.address for t in all_targets if is_backend_variant(t))
    return AllBackendVariants(await Get(BackendVariants, BackendVariantsRequest(addresses)))


def rules():
    return collect_rules()
