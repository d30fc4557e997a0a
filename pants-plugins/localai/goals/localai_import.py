"""`pants localai-import <dir>`: declares LocalAI's own backend folders, copied unchanged into <dir>.

For each `<dir>/<name>/` (LocalAI's backend/python/<name>/) it writes `<dir>/<name>/BUILD`, one
line: `localai_import(accelerators=[...])`, a variant per accelerator whose LocalAI profile has
a requirement file there, plus `arm64=[...]` (by hand: `arm64_tags=["by-hand"]`) for each of those
accelerators with a linux/arm64 pin policy ([localai.torch_family.<accel>-arm64]: cpu); for
`<dir>/common/` (LocalAI's helpers) `localai_common()`. In
pants.toml it writes the variants' `[python.resolves]` and `[python.resolves_to_constraints_file]`
entries between marker comments. Re-running rewrites the same bytes; the backends' own files
are only read. `--check` writes nothing and fails when something would change.

Folder by folder: a folder that cannot be imported (no backend.py, a requirement file named
after a profile we do not know, a line the requirement parser refuses) is skipped with its
reason (file, line, fix) and every other folder is written; a profile that cannot be imported
(an index line that would break an accelerator's isolation) is skipped alone, its folder's other
variants declared. An index of the folder's own that `[localai.overrides.<folder>] extra_indexes`
declares for that variant is honoured: the BUILD line carries `extra_indexes`, and the variant's
resolve alone gets a pip options file with it (goals/resolves.py writes it, from the BUILD files).
The summary says "imported N of M folders"; the exit code is non-zero while
anything was skipped, unless `--allow-skipped` is given (a skipped folder's old BUILD file and
pants.toml entries are left as they were: nothing is written for it).

Git requirements are pinned here, once: each git URL of the tree with no commit in
3rdparty/localai-git-pins.toml is resolved with `git ls-remote` and recorded (model/git_pins.py);
a URL git cannot resolve leaves its variants not lockable, naming it. Existing pins are kept,
so a re-run asks git nothing and rewrites the same bytes.

grpcio-tools is not added to any resolve it writes: an imported folder's gRPC stubs come from the
`grpc-stubs` resolve (3rdparty/grpc-stubs/BUILD), checked at `pants package` against the grpcio
and protobuf of the variant's lock (package/proto.py). A folder's own grpcio-tools line is read
like any other requirement.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePath

from pants.base.specs import Specs
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, PathGlobs, Snapshot, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule
from pants.option.option_types import BoolOption, StrListOption
from pants.util.frozendict import FrozenDict

from localai.errors import LocalAIError
from localai.goals import import_report
from localai.goals.resolves import PANTS_TOML, DeclaredResolves, ResolveEntry, orphan_lines, pants_toml_update_for
from localai.model.accelerators import AcceleratorMatrix
from localai.model.git_pins import (
    GIT_PINS_PATH,
    NO_PINS,
    GitPins,
    GitRefsRequest,
    GitUrl,
    ResolvedGitRefs,
)
from localai.model.localai_layout import (
    BACKEND_FILE,
    COMMON_DIR,
    REQUIREMENT_FILE,
    InstallShOverride,
    LocalAIConventions,
    LocalAILayoutError,
    Profile,
    builds_profile,
    check_file_names,
    direct_references,
    variant_requirements,
)
from localai.model.lockfile import LockfileRequest, MaybeLockfile
from localai.model.variant import backend_name, lockfile_path, pip_options_path, resolve_name, variant_name
from localai.platforms import BUILD_PLATFORM, PLATFORMS, TargetPlatform

BUILD_HEADER = "# Written by `./pants localai-import {root}`: LocalAI's folder, built unchanged. Do not edit; re-run it."


class LocalAIImportError(LocalAIError):
    pass


@dataclass(frozen=True)
class ImportedVariant:
    directory: str  # e.g. backends/localai/rerankers
    backend: str  # resolve prefix, e.g. localai-rerankers
    accelerator: str
    accelerator_pip_options: str
    replacements: tuple[str, ...]
    not_lockable: str | None
    # The folder's own indexes for this variant ([localai.overrides.<folder>] extra_indexes)
    extra_indexes: tuple[str, ...] = ()
    # uv resolves it before pex locks it ([localai.overrides.<folder>] prelock)
    prelock: bool = False
    # (project, why): forbidden projects it may hold ([localai.overrides.<folder>] exempt)
    exempt: tuple[tuple[str, str], ...] = ()
    # A cross-built platform's variant (`:cpu-arm64`, BUILD `arm64=[...]`): its own pin policy
    platform: TargetPlatform = PLATFORMS[BUILD_PLATFORM]

    @property
    def name(self) -> str:
        """The variant's name, as BUILD keys it: cpu, cpu-arm64."""
        return variant_name(self.accelerator, self.platform)

    @property
    def resolve(self) -> str:
        return resolve_name(self.backend, self.name)

    @property
    def pip_options(self) -> str:
        """As Variant.pip_options names it once the BUILD file is written."""
        return pip_options_path(self.accelerator_pip_options, self.resolve, self.extra_indexes, self.prelock)

    def entry(self) -> ResolveEntry:
        own = self.accelerator_pip_options if self.pip_options != self.accelerator_pip_options else ""
        return ResolveEntry(
            self.resolve, lockfile_path(self.resolve), self.pip_options, self.directory, self.extra_indexes, own, self.prelock
        )


@dataclass(frozen=True)
class Skipped:
    """A folder (accelerator None) or one variant of a folder that was not imported, and why."""

    directory: str
    accelerator: str | None
    reason: str

    def line(self) -> str:
        what = self.directory if self.accelerator is None else f"{self.directory} ({self.accelerator} variant)"
        return f"skipped {what}: {self.reason}"


@dataclass(frozen=True)
class ImportPlan:
    build_files: dict[str, str]
    variants: tuple[ImportedVariant, ...]
    notes: tuple[str, ...]
    skipped: tuple[Skipped, ...]
    folders: tuple[str, ...]  # every backend folder found (common/ not counted)
    imported: tuple[str, ...]  # the folders whose BUILD file is written

    @property
    def problems(self) -> tuple[str, ...]:
        return tuple(s.line() for s in self.skipped)

    def summary(self, root: str) -> str:
        variants = sum(1 for s in self.skipped if s.accelerator is not None)
        extra = f"; {variants} variant(s) of imported folders skipped" if variants else ""
        return f"{root}: imported {len(self.imported)} of {len(self.folders)} folders{extra}"


def _pylist(items) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


# Cross-built variants of imported folders are left out of `::` (CI's `./pants lint test ::` would
# package and audit each one: minutes per torch artifact on CI's 2 cores); built by hand with
# `./pants --tag="['by-hand']" package <dir>:cpu-arm64`, as our own backends' arm64 variants but rerankers.
CROSS_TAGS = ("by-hand",)


def build_line(variants: list[ImportedVariant]) -> str:
    """The folder's `localai_import(...)` line; per-variant arguments are keyed by variant name
    (cpu, cpu-arm64), as localai_backend's are."""
    native = [v for v in variants if not v.platform.cross]
    args = [f"accelerators={_pylist(v.accelerator for v in native)}"]
    arm64 = [v.accelerator for v in variants if v.platform.cross]
    if arm64:
        args.append(f"arm64={_pylist(arm64)}, arm64_tags={_pylist(CROSS_TAGS)}")
    notes = {v.name: v.not_lockable for v in variants if v.not_lockable}
    if notes:
        pairs = ", ".join(f'"{a}": {n!r}' for a, n in notes.items())
        args.append(f"not_lockable_here={{{pairs}}}")
    extra = {v.name: v.extra_indexes for v in variants if v.extra_indexes}
    if extra:
        pairs = ", ".join(f'"{a}": {_pylist(urls)}' for a, urls in extra.items())
        args.append(f"extra_indexes={{{pairs}}}")
    prelock = [v.accelerator for v in variants if v.prelock]
    if prelock:
        args.append(f"prelock={_pylist(prelock)}")
    exempt = {v.name: dict(v.exempt) for v in variants if v.exempt}
    if exempt:
        args.append(f"exempt={json.dumps(exempt)}")  # JSON's strings are Python's: one quote style
    return f"localai_import({', '.join(args)})"


def _folder_variants(
    name: str, directory: str, reqs: dict[str, str], matrix: AcceleratorMatrix, conventions: LocalAIConventions,
    pins: GitPins, notes: list[str],
) -> tuple[list[ImportedVariant], list[Skipped]]:
    """A folder's variants, one per LocalAI profile it builds that maps to an accelerator, on the
    build machine's platform and on each cross-built platform with a pin policy of its own
    (LocalAIConventions.cross_platforms_of: cpu-arm64), and the variants skipped with their reason
    (notes gets the profiles with no accelerator here)."""
    declared, folder_skips = [], []
    override = conventions.overrides.get(name, InstallShOverride())
    for profile in conventions.profiles.values():
        if not builds_profile(name, reqs, profile, conventions):
            continue
        if profile.accelerator is None:
            notes.append(f"{directory}: profile {profile.name} has no accelerator here; not declared")
            continue
        accel = matrix.accelerators[profile.accelerator]
        for platform in (PLATFORMS[BUILD_PLATFORM], *conventions.cross_platforms_of(accel)):
            try:
                layered = variant_requirements(directory, reqs, accel, conventions, pins, platform)
            except LocalAILayoutError as e:
                # A profile's own file (an index of another build): that variant alone.
                folder_skips.append(Skipped(directory, variant_name(accel.name, platform), str(e)))
                continue
            not_lockable = (
                "cannot be built here: " + "; ".join(layered.unsatisfied) if layered.unsatisfied else None
            )
            declared.append(
                ImportedVariant(
                    directory,
                    backend_name(directory),
                    accel.name,
                    accel.pip_options,
                    layered.replacements,
                    not_lockable,
                    layered.extra_indexes,
                    accel.name in override.prelock and not platform.cross,
                    tuple(override.exempt.get(accel.name, {}).items()),
                    platform,
                )
            )
    return declared, folder_skips


def plan_import(
    root: str,
    folders: dict[str, dict[str, str]],
    matrix: AcceleratorMatrix,
    conventions: LocalAIConventions,
    pins: GitPins = NO_PINS,
) -> ImportPlan:
    """``folders``: {folder name: {file name: content for requirement files, "" for others}}."""
    build_files, variants, notes, skipped, imported = {}, [], [], [], []
    header = BUILD_HEADER.format(root=root)
    if COMMON_DIR in folders:
        build_files[f"{root}/{COMMON_DIR}/BUILD"] = f"{header}\nlocalai_common()\n"
    else:
        skipped.append(Skipped(
            f"{root}/{COMMON_DIR}", None,
            f"{root}/{COMMON_DIR}/ is missing: LocalAI's backends import grpc_auth and other helpers from "
            f"../common. Fix: copy LocalAI's backend/python/common/ to {root}/{COMMON_DIR}/.",
        ))
    backend_folders = tuple(n for n in sorted(folders) if n != COMMON_DIR)
    for name in backend_folders:
        directory = f"{root}/{name}"
        files = folders[name]
        if BACKEND_FILE not in files:
            skipped.append(Skipped(
                directory, None,
                f"{directory}/{BACKEND_FILE} is missing: LocalAI runs backend.py from each backend folder. "
                f"Fix: copy LocalAI's backend/python/{name}/ unchanged, or remove {directory}/.",
            ))
            continue
        reqs = {n: c for n, c in files.items() if REQUIREMENT_FILE.match(n)}
        bad_names = check_file_names(directory, list(reqs), conventions)
        if bad_names:
            skipped.append(Skipped(directory, None, " ".join(bad_names)))
            continue
        declared, folder_skips = _folder_variants(name, directory, reqs, matrix, conventions, pins, notes)
        if not declared and folder_skips:
            # Every profile failed (often one line of the shared requirements.txt): the folder is skipped.
            reasons = dict.fromkeys(s.reason for s in folder_skips)
            skipped.append(Skipped(directory, None, " | ".join(reasons)))
            continue
        skipped.extend(folder_skips)
        if not declared:
            notes.append(f"{directory}: no requirement file of a profile built here; nothing declared")
            continue
        declared.sort(key=lambda v: (list(matrix.accelerators).index(v.accelerator), v.platform.cross))
        variants.extend(declared)
        imported.append(name)
        build_files[f"{directory}/BUILD"] = f"{header}\n{build_line(declared)}\n"
    return ImportPlan(build_files, tuple(variants), tuple(notes), tuple(skipped), backend_folders, tuple(imported))


def git_urls(folders: dict[str, dict[str, str]]) -> tuple[str, ...]:
    """Every git URL the requirement files of ``folders`` name, as written (sorted, once each)."""
    found = set()
    for name, files in folders.items():
        for file, content in files.items():
            if not REQUIREMENT_FILE.match(file):
                continue
            try:
                found.update(direct_references(f"{name}/{file}", content).git_urls)
            except LocalAILayoutError:
                continue  # the folder is skipped with this reason by plan_import
    return tuple(sorted(found))


def import_entries(root: str, declared: tuple[ResolveEntry, ...], plan: ImportPlan) -> tuple[ResolveEntry, ...]:
    """pants.toml's entries after importing ``root``: its imported folders' variants as planned
    now (the BUILD files being written are not in the graph yet), every other declared variant as
    is. A skipped folder keeps what it had (its BUILD file is not rewritten either, so the two
    stay consistent); a folder no longer in the tree loses its entries."""
    kept = {f"{root}/{name}" for name in plan.folders if name not in plan.imported}
    in_root = lambda d: d == root or d.startswith(root + "/")  # noqa: E731
    others = tuple(e for e in declared if not in_root(e.directory) or e.directory in kept)
    return others + tuple(v.entry() for v in plan.variants)


class LocalAIImportSubsystem(GoalSubsystem):
    name = "localai-import"
    help = "Declare LocalAI's own backend folders (copied unchanged into a directory) as backend variants."

    check = BoolOption(default=False, help="Write nothing; fail when the BUILD files or pants.toml are not current.")
    allow_skipped = BoolOption(
        default=False,
        help=(
            "Exit 0 although some folders or variants were skipped (each is still printed with its "
            "reason). Without it the goal fails while anything is skipped, after writing the rest."
        ),
    )
    report = BoolOption(
        default=False,
        help=(
            "Write nothing; print per folder and LocalAI profile whether LocalAI's own files, resolved "
            "LocalAI's way (PyPI first, their extra indexes), pull nvidia/cuda/triton packages and how "
            "many MB, next to our locked variant (import_report.py). Needs network."
        ),
    )
    report_profiles = StrListOption(
        default=[],
        help=(
            "With --report: only these LocalAI profiles (e.g. `['cpu']`); default every profile LocalAI builds a folder "
            "for (a requirement file of that profile, or `profiles` in [localai.overrides.<folder>])."
        ),
    )


class LocalAIImportGoal(Goal):
    subsystem_cls = LocalAIImportSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


def _platforms_of(profile: Profile, matrix: AcceleratorMatrix, conventions: LocalAIConventions) -> tuple[TargetPlatform, ...]:
    """The platforms the import declares the profile's variants for: the build machine's, then the
    cross-built ones with a pin policy of their own (cpu-arm64)."""
    if profile.accelerator is None:
        return (PLATFORMS[BUILD_PLATFORM],)
    return (PLATFORMS[BUILD_PLATFORM], *conventions.cross_platforms_of(matrix.accelerators[profile.accelerator]))


async def upstream_report(
    root: str, folders: dict[str, dict[str, str]], matrix: AcceleratorMatrix, conventions: LocalAIConventions,
    profiles: tuple[str, ...],
) -> list[str]:
    cases = []  # (directory, files, profile, ((platform, lockfile path), ...))
    for name in sorted(folders):
        files = {n: c for n, c in folders[name].items() if REQUIREMENT_FILE.match(n)}
        if name == COMMON_DIR or not files:
            continue
        directory = f"{root}/{name}"
        for profile in conventions.profiles.values():
            if (profiles and profile.name not in profiles) or not builds_profile(name, files, profile, conventions):
                continue
            paths = tuple(
                (p.machine, lockfile_path(resolve_name(backend_name(directory), variant_name(profile.accelerator or "", p))))
                for p in _platforms_of(profile, matrix, conventions)
            )
            cases.append((directory, files, profile, paths))
    # The resolves wait on the network more than on the CPU: run as many as Pants allows at once.
    resolutions = await MultiGet(Get(import_report.Resolution, import_report.ResolutionRequest(d, FrozenDict(f), p)) for d, f, p, _ in cases)
    lockfiles = await MultiGet(Get(MaybeLockfile, LockfileRequest(path)) for *_, paths in cases for _, path in paths)
    by_path = dict(zip((path for *_, paths in cases for _, path in paths), (m.lockfile for m in lockfiles)))
    lines = [
        import_report.report_line(
            directory, profile, resolution,
            import_report.ours_by_platform([(machine, import_report.ours_line(path, by_path[path], profile)) for machine, path in paths]),
        )
        for (directory, _, profile, paths), resolution in zip(cases, resolutions)
    ]
    return [*lines, import_report.totals_line(resolutions)]


async def pin_git_refs(console: Console, folders: dict[str, dict[str, str]], pins: GitPins) -> GitPins:
    """``pins`` plus a commit for each git URL of ``folders`` that has none yet (git ls-remote)."""
    missing = tuple(u for u in git_urls(folders) if pins.pin(u) is None)
    if not missing:
        return pins
    resolved = await Get(ResolvedGitRefs, GitRefsRequest(missing))
    for url, commit in sorted(resolved.commits.items()):
        console.print_stdout(f"git pin: {url} -> {commit} ({GitUrl.parse(url).ref or 'HEAD'})")
    for url, why in sorted(resolved.failures.items()):
        console.print_stderr(f"git pin: {url} not pinned: {why}; its variants are not lockable")
    return pins.with_pins(dict(resolved.commits))


def import_roots(specs: Specs) -> tuple[str, ...]:
    return tuple(s.directory for s in specs.includes.dir_literals)


async def _read_folders(root: str) -> dict[str, dict[str, str]]:
    """{folder name: {file name: content for requirement files, "" for the others}} under ``root``."""
    listing = await Get(Snapshot, PathGlobs([f"{root}/*/*"]))
    req_contents = await Get(DigestContents, PathGlobs([f"{root}/*/requirements*.txt"]))
    folders: dict[str, dict[str, str]] = {}
    for path in listing.files:
        p = PurePath(path)
        folders.setdefault(p.parent.name, {})[p.name] = ""
    for fc in req_contents:
        p = PurePath(fc.path)
        folders[p.parent.name][p.name] = fc.content.decode()
    return folders


def variant_lines(v: ImportedVariant) -> list[str]:
    """What the import prints of a declared variant: lockable or why not, pins replaced, indexes, exemptions, prelock."""
    status = f" (not lockable: {v.not_lockable})" if v.not_lockable else ""
    lines = [f"{v.resolve}: {v.name} variant{status}"]
    lines += [f"  pin policy: {r}" for r in v.replacements]
    lines += [f"  extra index: {url}, seen by {v.resolve} alone ({v.pip_options})" for url in v.extra_indexes]
    lines += [f"  exempt: {project}, which {v.accelerator} forbids: {why}" for project, why in v.exempt]
    if v.prelock:
        lines.append(f"  prelock: run `./pants localai-prelock --resolve={v.resolve}` before generate-lockfiles")
    return lines


async def _changed(writes: dict[str, str]) -> dict[str, str]:
    """The files of ``writes`` whose content differs from the repository's."""
    current = await Get(DigestContents, PathGlobs(list(writes)))
    have = {fc.path: fc.content.decode() for fc in current}
    return {p: c for p, c in writes.items() if have.get(p) != c}


@goal_rule
async def localai_import(
    console: Console, workspace: Workspace, specs: Specs, subsystem: LocalAIImportSubsystem
) -> LocalAIImportGoal:
    roots = import_roots(specs)
    if not roots:
        console.print_stderr("Usage: ./pants localai-import backends/localai  (the folder holding LocalAI's backend folders)")
        return LocalAIImportGoal(exit_code=1)
    matrix = await Get(AcceleratorMatrix)
    conventions = await Get(LocalAIConventions)
    declared = await Get(DeclaredResolves)
    pins = await Get(GitPins)
    entries = declared.entries
    writes: dict[str, str] = {}
    skipped = 0
    for root in roots:
        folders = await _read_folders(root)
        pins = await pin_git_refs(console, folders, pins)
        plan = plan_import(root, folders, matrix, conventions, pins)
        if subsystem.report:
            for line in await upstream_report(root, folders, matrix, conventions, tuple(subsystem.report_profiles)):
                console.print_stdout(line)
            continue
        for note in plan.notes:
            console.print_stdout(f"note: {note}")
        for skip in plan.skipped:
            console.print_stderr(skip.line())
        skipped += len(plan.skipped)
        for v in plan.variants:
            for line in variant_lines(v):
                console.print_stdout(line)
        writes.update(plan.build_files)
        entries = import_entries(root, entries, plan)
        console.print_stderr(f"localai-import: {plan.summary(root)}")
    if subsystem.report:
        return LocalAIImportGoal(exit_code=0)
    skip_exit = 1 if skipped and not subsystem.allow_skipped else 0
    if skip_exit:
        console.print_stderr(
            f"localai-import: {skipped} skipped (reasons above); every other folder is declared. "
            "Fix them, or pass --allow-skipped to accept the import as it is."
        )
    if pins.commits:
        writes[GIT_PINS_PATH] = pins.render()
    update = await pants_toml_update_for(entries)
    writes[PANTS_TOML] = update.updated
    writes.update(update.files)
    for line in orphan_lines(update):
        console.print_stderr(line)
    changed = await _changed(writes)
    if subsystem.check:
        for p in sorted(changed):
            console.print_stderr(f"{p} is not current: run `./pants localai-import {' '.join(roots)}`")
        return LocalAIImportGoal(exit_code=1 if changed else skip_exit)
    if changed:
        workspace.write_digest(
            await Get(Digest, CreateDigest([FileContent(p, c.encode()) for p, c in sorted(changed.items())]))
        )
    for p in sorted(writes):
        console.print_stdout(f"{'wrote' if p in changed else 'unchanged'} {p}")
    return LocalAIImportGoal(exit_code=skip_exit)


def rules():
    return collect_rules()
