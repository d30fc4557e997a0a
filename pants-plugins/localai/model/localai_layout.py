"""LocalAI's own backend folders, read LocalAI's way (backend/python/<name>/ copied unchanged).

- Profiles: LocalAI's build profile names (cpu, cublas12, ...) map to our accelerators by data
  ([localai.profiles] in 3rdparty/accelerators.toml).
- Install order (LocalAI's libbackend.sh installRequirements): requirements-install.txt,
  requirements.txt, requirements-${BUILD_TYPE}.txt, requirements-${BUILD_PROFILE}.txt (when it
  differs), requirements-cpu.txt (when BUILD_TYPE is empty), requirements-after.txt,
  requirements-${BUILD_PROFILE}-after.txt (when the profile differs from the type). A later
  file's pin of a project replaces an earlier one, as a later `uv pip install` would.
- Index isolation: an `--extra-index-url`/`--index-url` line is honoured only when it is the
  index of the accelerator being built (its resolve already sees that index, through
  3rdparty/accelerators/<accel>.txt), or an `--extra-index-url` that
  `[localai.overrides.<folder>] extra_indexes = { <accel> = [...] }` declares for that folder's
  variant alone (then that variant's resolve alone sees it, through a pip options file of its
  own: goals/resolves.py); any other index is refused, naming the file, the line and that fix.
- Pin policy: torch-family pins are replaced by what the variant's accelerator provides on its
  platform ([localai.torch_family.<variant>]: `cpu` on the build machine's platform, `cpu-arm64`
  on linux/arm64); each replacement is recorded as one sentence. A cross-built platform's table
  is what declares the import's variants for it: an accelerator gets an arm64 variant of each
  folder it builds when it lists linux_aarch64 and `[localai.torch_family.<accel>-arm64]` exists.
- Direct references: LocalAI's bare `git+https://host/repo[@ref]` lines and bare wheel/sdist URL
  lines (what `pip install -r` accepts, PEP 508 does not) are read as `name @ url`, the name
  taken from the wheel or sdist file name, or for git from the repository's name (a `#egg=`
  fragment wins); each reading is recorded as one sentence. A name that the built metadata
  contradicts fails the lock (pip checks it), so a wrong guess is never silently locked.
  A git URL (bare or `name @ git+...`) is read naming the commit its ref resolved to
  (model/git_pins.py); pex locks it with the sha256 of that commit's tree, and a wheel or
  sdist URL with the sha256 of the file. A git URL with no pinned commit leaves the variant not
  lockable, naming the URL.
- What install.sh adds ([localai.overrides.<folder>] in 3rdparty/accelerators.toml, reviewed
  data): `no_deps` (requirements install.sh installs with --no-deps: a lock resolves every
  requirement's dependencies, so it cannot honour that) and `out_of_scope` (a build step no
  requirement file shows) make the folder's variants not lockable, with the reason;
  `not_lockable = { <accel> = "<why>" }` does so for one variant whose lock was measured to fail
  here for a reason no requirement line can fix (an sdist pip 20.3.4 cannot build);
  `profiles = ["cpu"]` declares a profile LocalAI builds from the shared files alone (its gallery
  lists cpu-kitten-tts, whose folder has no requirements-cpu.txt); `exempt = { <accel> =
  { "<project>" = "<why>" } }` lets that variant hold projects its accelerator's `forbidden`
  names (rfdetr's nvidia-ml-py on cpu), never a GPU runtime library (lint/audit.py).
- grpcio-tools: LocalAI installs it at protogen time in a throwaway venv, bounded by the
  backend's grpcio and protobuf; here nothing is added to the variant's resolve: the stubs come
  from the project's `grpc-stubs` resolve (one grpcio-tools, 3rdparty/grpc-stubs/BUILD), checked
  against the grpcio and protobuf the variant locks (package/proto.py). A folder's own
  grpcio-tools line is read like any other.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import PurePath

import toml  # pants: no-infer-dep (toml comes with pantsbuild.pants)
from pants.backend.python.pip_requirement import PipRequirement
from pants.engine.fs import DigestContents, PathGlobs
from pants.engine.rules import Get, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.accelerators import MATRIX_PATH, Accelerator, AcceleratorMatrix
from localai.model.git_pins import GIT_PINS_PATH, NO_PINS, GitPins, GitUrl, is_git_url
from localai.model.requirements import (
    LayeredRequirements,
    LocalAIRequirementsRequest,
    RequirementsFileError,
    layer_with_origin,
    normalized_name,
)
from localai.model.variant import variant_name
from localai.platforms import BUILD_PLATFORM, PLATFORMS, TargetPlatform, cross_platforms, platform_with_suffix

REQUIREMENT_FILE = re.compile(r"^requirements(?:-(?P<suffix>.+))?\.txt$")
BACKEND_FILE = "backend.py"
COMMON_DIR = "common"  # LocalAI's shared helpers, next to the backend folders
_INDEX_OPTIONS = ("--extra-index-url", "--index-url", "-i", "--find-links", "-f")


class LocalAILayoutError(LocalAIError):
    pass


@dataclass(frozen=True)
class Profile:
    name: str
    build_type: str
    accelerator: str | None


@dataclass(frozen=True)
class InstallShOverride:
    """What a folder's install.sh does beyond its requirement files ([localai.overrides.<folder>])."""

    no_deps: tuple[str, ...] = ()  # projects install.sh installs with --no-deps
    out_of_scope: str | None = None  # a build step the import does not reproduce, and why
    accelerators: tuple[str, ...] = ()  # the variants install.sh does it for; () means all
    # accelerator -> indexes this folder's variant of it may name (`--extra-index-url`), seen by
    # that variant's resolve alone; keyed by accelerator, so `accelerators` does not scope it
    extra_indexes: FrozenDict[str, tuple[str, ...]] = FrozenDict()
    # accelerators whose variant of this folder uv resolves first (goals/prelock.py): pip alone
    # backtracks for too long over its requirements
    prelock: tuple[str, ...] = ()
    # accelerator -> why this folder's variant of it was measured not lockable here (a lock that
    # fails for a reason no requirement line can fix); keyed by accelerator like extra_indexes
    not_lockable: FrozenDict[str, str] = FrozenDict()
    # LocalAI profiles this folder is built for from its shared files alone (no profile file
    # shows it; LocalAI's gallery lists the image, e.g. cpu-kitten-tts from requirements.txt)
    profiles: tuple[str, ...] = ()
    # accelerator -> {project: why}: projects that accelerator's `forbidden` names which its
    # variant of this folder may hold (the audit still fails any GPU runtime they ship or NEED)
    exempt: FrozenDict[str, FrozenDict[str, str]] = FrozenDict()

    def reasons(self, folder: str, accelerator: str, variant: str | None = None) -> tuple[str, ...]:
        """Why the folder's ``variant`` (default: the accelerator's on the build machine's platform)
        is not lockable: `not_lockable` is keyed by variant (measured per platform), the install.sh
        steps by accelerator (every platform runs the same install.sh)."""
        measured = self.not_lockable.get(variant or accelerator)
        found = [f"{measured} ([localai.overrides.{folder}] in {MATRIX_PATH})"] if measured else []
        if self.accelerators and accelerator not in self.accelerators:
            return tuple(found)
        if self.no_deps:
            found.append(
                f"{folder}/install.sh installs {', '.join(self.no_deps)} with --no-deps, which a lock cannot "
                f"honour (it resolves every requirement's dependencies) ([localai.overrides.{folder}] in {MATRIX_PATH})"
            )
        if self.out_of_scope:
            found.append(f"{folder}/install.sh: {self.out_of_scope} ([localai.overrides.{folder}] in {MATRIX_PATH})")
        return tuple(found)


_OVERRIDE_KEYS = {"no_deps", "out_of_scope", "accelerators", "extra_indexes", "prelock", "not_lockable", "profiles", "exempt"}


def _checked_override(entry: dict, where: str, key: str, default, valid, must: str, fix: str):
    """entry[key] (or default) when `valid` accepts it; else the error naming the table, the key and the fix."""
    value = entry.get(key, default)
    if not valid(value):
        raise LocalAILayoutError(f"{where}: {key} must {must}. Fix: {fix}.")
    return value


def _accelerators_named(matrix: AcceleratorMatrix, where: str, key: str, names) -> None:
    for accel in names:
        matrix.get(accel, context=f"{where} {key}")


def variant_key(matrix: AcceleratorMatrix, where: str, key: str) -> tuple[Accelerator, TargetPlatform]:
    """A table key naming a variant: an accelerator (`cpu`), or an accelerator and a cross-built
    platform it lists (`cpu-arm64`, platforms.py's suffix)."""
    for platform in cross_platforms():
        if key.endswith(platform.suffix) and key[: -len(platform.suffix)] in matrix.accelerators:
            accel = matrix.accelerators[key[: -len(platform.suffix)]]
            if platform.name not in accel.platforms:
                raise LocalAILayoutError(
                    f"{where}: '{key}' names {accel.name} on {platform.name}, which the {accel.name} accelerator does not "
                    f"list (`platforms` of [{accel.name}] in {MATRIX_PATH}). Fix: add the platform there, or drop '{key}'."
                )
            return accel, platform
    return matrix.get(key, context=where), PLATFORMS[BUILD_PLATFORM]


def _exempt(entry: dict, where: str, matrix: AcceleratorMatrix) -> dict:
    """`exempt = { <accel> = { project = why } }`: only projects the accelerator forbids, each with why."""
    checked = functools.partial(_checked_override, entry, where)
    exempt = checked(
        "exempt", {},
        lambda v: isinstance(v, dict) and all(
            isinstance(projects, dict) and projects
            and all(isinstance(why, str) and why.strip() for why in projects.values())
            for projects in v.values()
        ),
        "map an accelerator to {project = why}: the projects its `forbidden` names that this folder's variant "
        "may hold, each with why it holds no GPU runtime",
        'e.g. exempt = { cpu = { "nvidia-ml-py" = "pure Python: loads libnvidia-ml only when called" } }',
    )
    _accelerators_named(matrix, where, "exempt", exempt)
    for accel, projects in exempt.items():
        spared = [p for p in projects if not matrix.accelerators[accel].forbidden_in([normalized_name(p)])]
        if spared:
            raise LocalAILayoutError(
                f"{where}: exempt names {', '.join(spared)} for {accel}, whose `forbidden` list does not "
                f"name {'it' if len(spared) == 1 else 'them'}. Fix: drop {'it' if len(spared) == 1 else 'them'} from exempt."
            )
    return exempt


def _override(folder: str, entry: dict, matrix: AcceleratorMatrix, profiles: dict, path: str) -> InstallShOverride:
    """One `[localai.overrides.<folder>]` table, every key checked (type, accelerator names, exemptions)."""
    where = f"{path} [localai.overrides.{folder}]"
    unknown = sorted(set(entry) - _OVERRIDE_KEYS)
    if unknown:
        raise LocalAILayoutError(
            f"{where}: unknown key(s) {', '.join(unknown)}. Fix: use {', '.join(sorted(_OVERRIDE_KEYS))}."
        )
    checked = functools.partial(_checked_override, entry, where)
    accelerators_named = functools.partial(_accelerators_named, matrix, where)
    no_deps = checked(
        "no_deps", [], lambda v: isinstance(v, list) and all(isinstance(n, str) and n for n in v),
        "be a list of project names", 'e.g. no_deps = ["chatterbox-tts"]',
    )
    out_of_scope = checked(
        "out_of_scope", None, lambda v: v is None or (isinstance(v, str) and bool(v.strip())),
        "say why, as a sentence", 'out_of_scope = "<what install.sh does>"',
    )
    accels = tuple(entry.get("accelerators", ()))
    accelerators_named("accelerators", accels)
    extra = checked(
        "extra_indexes", {},
        lambda v: isinstance(v, dict) and all(
            isinstance(urls, list) and urls and all(isinstance(u, str) and "://" in u for u in urls) for urls in v.values()
        ),
        "map an accelerator to the index URLs its variant of this folder may name",
        'e.g. extra_indexes = { cuda13 = ["https://wheels.vllm.ai/0.27.1/cu130"] }',
    )
    accelerators_named("extra_indexes", extra)
    prelock = checked(
        "prelock", [], lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v),
        "list the accelerators whose variant of this folder uv resolves before pex locks it", 'e.g. prelock = ["cpu"]',
    )
    accelerators_named("prelock", prelock)
    not_lockable = checked(
        "not_lockable", {}, lambda v: isinstance(v, dict) and all(isinstance(r, str) and r.strip() for r in v.values()),
        "map a variant (an accelerator, or `<accelerator>-arm64`) to why this folder's variant cannot be locked here, as a sentence",
        'e.g. not_lockable = { cpu = "<what fails, measured>" }, or { "cpu-arm64" = "..." }',
    )
    for variant in not_lockable:  # keyed by variant: a lock measured on one platform
        variant_key(matrix, f"{where} not_lockable", variant)
    built_for = checked(
        "profiles", [], lambda v: isinstance(v, list) and all(p in profiles for p in v),
        f"list LocalAI profile names ({', '.join(sorted(profiles))}) the folder is built for from its shared files alone",
        'e.g. profiles = ["cpu"]',
    )
    exempt = _exempt(entry, where, matrix)
    return InstallShOverride(
        tuple(normalized_name(n) for n in no_deps),
        out_of_scope,
        accels,
        FrozenDict({a: tuple(u.rstrip("/") for u in urls) for a, urls in sorted(extra.items())}),
        tuple(prelock),
        FrozenDict(sorted(not_lockable.items())),
        tuple(built_for),
        FrozenDict(
            (a, FrozenDict(sorted((normalized_name(p), why.strip()) for p, why in projects.items())))
            for a, projects in sorted(exempt.items())
        ),
    )


@dataclass(frozen=True)
class LocalAIConventions:
    profiles: FrozenDict[str, Profile]
    # variant (accelerator, or accelerator + a cross platform's suffix: cpu-arm64) ->
    # {normalized project name: requirement, or "" when not provided here}
    torch_family: FrozenDict[str, FrozenDict[str, str]]
    # accelerator -> other PyTorch indexes of the same accelerator, dropped in favour of its own
    index_aliases: FrozenDict[str, tuple[str, ...]] = FrozenDict()
    # LocalAI folder name -> what its install.sh adds
    overrides: FrozenDict[str, InstallShOverride] = FrozenDict()

    @classmethod
    def parse(cls, content: str, matrix: AcceleratorMatrix, path: str = MATRIX_PATH) -> "LocalAIConventions":
        table = toml.loads(content).get("localai")
        if not table or "profiles" not in table:
            raise LocalAILayoutError(f"{path}: no [localai.profiles] table: LocalAI's profile names cannot be mapped")
        profiles = {}
        for name, entry in table["profiles"].items():
            accel = entry.get("accelerator")
            if accel is not None:
                matrix.get(accel, context=f"{path} [localai.profiles] {name}")
            profiles[name] = Profile(name, entry.get("build_type", ""), accel)
        family = {}
        for variant, pins in table.get("torch_family", {}).items():
            variant_key(matrix, f"{path} [localai.torch_family.{variant}]", variant)
            family[variant] = FrozenDict({normalized_name(k): v for k, v in pins.items()})
        aliases = {}
        for accel, urls in table.get("index_aliases", {}).items():
            matrix.get(accel, context=f"{path} [localai.index_aliases] {accel}")
            aliases[accel] = tuple(u.rstrip("/") for u in urls)
        overrides = {
            folder: _override(folder, entry, matrix, profiles, path) for folder, entry in table.get("overrides", {}).items()
        }
        return cls(FrozenDict(profiles), FrozenDict(family), FrozenDict(aliases), FrozenDict(overrides))

    def cross_platforms_of(self, accel: Accelerator) -> tuple[TargetPlatform, ...]:
        """The cross-built platforms the import declares ``accel``'s variants for: those the
        accelerator lists that have a pin policy of their own ([localai.torch_family.<accel><suffix>])."""
        return tuple(
            p for p in cross_platforms() if p.name in accel.platforms and variant_name(accel.name, p) in self.torch_family
        )

    def profile_of(self, accelerator: str) -> Profile | None:
        return next((p for p in self.profiles.values() if p.accelerator == accelerator), None)

    def known_suffixes(self) -> set[str]:
        names = set(self.profiles)
        types = {p.build_type for p in self.profiles.values() if p.build_type}
        return {"install", "after", *names, *types, *(f"{n}-after" for n in names)}


def install_order(profile: Profile) -> tuple[str, ...]:
    """Requirement file names in the order LocalAI's installer reads them for a profile."""
    files = ["requirements-install.txt", "requirements.txt"]
    if profile.build_type:
        files.append(f"requirements-{profile.build_type}.txt")
    if profile.build_type != profile.name:
        files.append(f"requirements-{profile.name}.txt")
    if not profile.build_type:
        files.append("requirements-cpu.txt")
    files.append("requirements-after.txt")
    if profile.build_type != profile.name:
        files.append(f"requirements-{profile.name}-after.txt")
    return tuple(dict.fromkeys(files))  # the cpu profile names requirements-cpu.txt twice


def profile_files(profile: Profile) -> tuple[str, ...]:
    """The files of a profile that other profiles do not read: a variant is declared when one exists."""
    shared = {"requirements-install.txt", "requirements.txt", "requirements-after.txt"}
    return tuple(f for f in install_order(profile) if f not in shared)


def builds_profile(folder: str, names, profile: Profile, conventions: LocalAIConventions) -> bool:
    """Whether LocalAI builds `folder` for `profile`: a file of that profile exists, or the
    overrides say it is built from the shared files alone."""
    override = conventions.overrides.get(folder, InstallShOverride())
    return any(f in names for f in profile_files(profile)) or (profile.name in override.profiles and "requirements.txt" in names)


def check_file_names(directory: str, names: list[str], conventions: LocalAIConventions) -> list[str]:
    """Problems with requirement file names: a suffix that is no LocalAI profile or build type."""
    problems = []
    known = conventions.known_suffixes()
    for name in sorted(names):
        m = REQUIREMENT_FILE.match(name)
        if m and m.group("suffix") is not None and m.group("suffix") not in known:
            problems.append(
                f"{directory}/{name}: '{m.group('suffix')}' is not a LocalAI build profile or build type "
                f"this repository knows ({', '.join(sorted(conventions.profiles))}; [localai.profiles] in "
                f"{MATRIX_PATH}). Fix: rename the file to a known profile, or add the profile to "
                f"[localai.profiles]."
            )
    return problems


def index_lines(content: str) -> list[tuple[int, str, str]]:
    """(line number, option, url) of every index or find-links option in a requirement file."""
    found = []
    for i, raw in enumerate(content.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        for opt in _INDEX_OPTIONS:
            if line == opt or line.startswith(opt + " ") or line.startswith(opt + "="):
                url = line[len(opt) :].lstrip(" =").strip()
                found.append((i, opt, url))
                break
    return found


@dataclass(frozen=True)
class IndexCheck:
    notes: tuple[str, ...]  # one sentence per index line honoured other than the accelerator's own
    extra_indexes: tuple[str, ...]  # the folder's declared indexes its lines name (for this variant's resolve)


def check_isolation(
    path: str,
    content: str,
    accel: Accelerator,
    aliases: tuple[str, ...] = (),
    declared: tuple[str, ...] = (),
) -> IndexCheck:
    """Refuses an index that is not the accelerator's own: its resolve would see another build.
    Honours, with a note, aliases of the accelerator's index (dropped) and the ``declared`` extra
    indexes of this folder's variant ([localai.overrides.<folder>] extra_indexes; returned, so
    that variant's resolve alone sees them)."""
    notes, extra = [], []
    file = PurePath(path).name
    folder = PurePath(path).parent.name
    for lineno, opt, url in index_lines(content):
        if opt in ("--extra-index-url", "--index-url", "-i"):
            if url.rstrip("/") == accel.index.rstrip("/"):
                continue  # honoured: the accelerator's resolve already sees this index (its pip options)
            if url.rstrip("/") in aliases:
                notes.append(f"{file} names index {url}; {accel.name} takes its torch family from {accel.index}")
                continue
            if opt == "--extra-index-url" and url.rstrip("/") in declared:
                extra.append(url.rstrip("/"))
                notes.append(
                    f"{file} line {lineno} names index {url}: seen by this {accel.name} variant's resolve alone "
                    f"([localai.overrides.{folder}] extra_indexes in {MATRIX_PATH})"
                )
                continue
        declare = (
            f" If the index belongs to this folder's {accel.name} variant alone, declare it: "
            f"`[localai.overrides.{folder}] extra_indexes = {{ {accel.name} = [\"{url.rstrip('/')}\"] }}` in {MATRIX_PATH} "
            f"(that variant's resolve alone then sees it), then re-run `./pants localai-import`."
            if opt == "--extra-index-url"
            else ""
        )
        raise LocalAILayoutError(
            f"{path} line {lineno}: `{opt} {url}` would break the {accel.name} accelerator's index "
            f"isolation: its resolves see PyPI and {accel.index} only ({accel.pip_options}), so "
            f"another index could lock another accelerator's wheel. Fix: move the line to the "
            f"requirement file of the profile whose index it is, or declare that index for "
            f"{accel.name} in {MATRIX_PATH}.{declare}"
        )
    return IndexCheck(tuple(notes), tuple(dict.fromkeys(extra)))


_BARE_URL = re.compile(r"^(?P<url>git\+(?:https?|ssh|file)://\S+|https?://\S+|file://\S+)\s*(?P<marker>;.*)?$")
_WHEEL_NAME = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*?)-\d[^-]*(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_SDIST_NAME = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*?)-\d[A-Za-z0-9.+!_-]*\.(?:tar\.gz|zip|tar\.bz2)$")


def name_of_url(url: str) -> str | None:
    """The project a bare URL requirement installs, from the URL alone: `#egg=`, a wheel's or
    sdist's file name, or a git repository's last path component. None when it cannot be told."""
    base, _, fragment = url.partition("#")
    for part in fragment.split("&"):
        if part.startswith("egg="):
            return part[4:]
    path = base.split("?", 1)[0].rstrip("/")
    last = path.rsplit("/", 1)[-1]
    if base.startswith("git+"):
        repo = last.split("@", 1)[0]  # `repo@ref`
        repo = repo[:-4] if repo.endswith(".git") else repo
        return repo or None
    for pattern in (_WHEEL_NAME, _SDIST_NAME):
        m = pattern.match(last)
        if m:
            return m.group("name")
    return None


_NAMED_URL = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?)\s*@\s*(?P<url>\S+)\s*(?P<marker>;.*)?$")


@dataclass(frozen=True)
class DirectReferences:
    content: str  # the file with its URL lines read as pinned PEP 508 direct references
    notes: tuple[str, ...]  # one sentence per line so read
    unpinned: tuple[str, ...]  # git URLs with no pinned commit: the variant is not lockable
    git_urls: tuple[str, ...] = ()  # every git URL, as the file writes it (the pins' keys)


def direct_references(path: str, content: str, pins: GitPins = NO_PINS) -> DirectReferences:
    """``content`` with LocalAI's bare URL lines read as PEP 508 direct references and git refs
    read as the commits ``pins`` records. A URL whose project cannot be told from it is refused,
    naming the file and line."""
    lines, notes, unpinned, git_urls = [], [], [], []
    file = PurePath(path).name
    for lineno, raw in enumerate(content.splitlines(), start=1):
        stripped = raw.split(" #", 1)[0].strip()
        bare, named = _BARE_URL.match(stripped), _NAMED_URL.match(stripped)
        if not bare and not named:
            lines.append(raw)
            continue
        m = bare or named
        url, marker = m.group("url"), (m.group("marker") or "").strip()
        name = named.group("name") if named else name_of_url(url)
        if name is None:
            raise LocalAILayoutError(
                f"{path} line {lineno}: `{raw.strip()}` names no project: neither a wheel or sdist file "
                f"name nor a git repository. Fix: write it as `name @ {url}` (PEP 508), or add `#egg=name`."
            )
        read = url
        if is_git_url(url):
            git_urls.append(url)
            pinned = pins.pin(url)
            read = pinned or GitUrl.parse(url).pinned(None)
            if pinned is None:
                unpinned.append(
                    f"{file} line {lineno}: `{url}` has no commit pinned in {GIT_PINS_PATH} (git could not "
                    f"resolve its ref when the folder was imported; re-run `./pants localai-import` where the host is reachable)"
                )
        ref = f"{name} @ {read}" + (f" {marker}" if marker else "")
        lines.append(ref)
        if bare or read != url:
            notes.append(f"{file} line {lineno}: `{url}` read as `{ref}`")
    text = "\n".join(lines) + ("\n" if content.endswith("\n") else "")
    return DirectReferences(text, tuple(notes), tuple(unpinned), tuple(git_urls))


@dataclass(frozen=True)
class PolicyResult:
    requirements: tuple[str, ...]
    replacements: tuple[str, ...]
    unsatisfied: tuple[str, ...]


def apply_policy(
    merged: dict[str, tuple[str, PipRequirement]], accel: str, conventions: LocalAIConventions
) -> PolicyResult:
    """``accel``: the policy's key, the variant's name (`cpu`, `cpu-arm64`)."""
    policy = conventions.torch_family.get(accel, FrozenDict())
    reqs, replaced, unsatisfied = {}, [], []
    for name, (path, req) in merged.items():
        if name not in policy:
            reqs[name] = str(req)
            continue
        provided = policy[name]
        file = PurePath(path).name
        if not provided:
            unsatisfied.append(
                f"{file} needs {req}; {accel} provides no {name} build here ([localai.torch_family.{accel}] in {MATRIX_PATH})"
            )
            continue
        if str(req) != provided:
            asked = "pinned" if req.specs or req.url else "asks for"
            replaced.append(f"{file} {asked} {req}; {accel} provides {provided}")
        reqs[name] = provided
    return PolicyResult(tuple(reqs[n] for n in sorted(reqs)), tuple(replaced), tuple(unsatisfied))


def variant_requirements(
    directory: str,
    files: dict[str, str],
    accel: Accelerator,
    conventions: LocalAIConventions,
    pins: GitPins = NO_PINS,
    platform: TargetPlatform = PLATFORMS[BUILD_PLATFORM],
) -> LayeredRequirements:
    """A LocalAI folder's requirements for one accelerator on ``platform``: LocalAI's files of the
    accelerator's profile (the same on every platform), the pin policy of the variant.
    ``files``: {file name: content}."""
    variant = variant_name(accel.name, platform)
    if platform.cross and platform not in conventions.cross_platforms_of(accel):
        raise LocalAILayoutError(
            f"{directory}: the {variant} variant has no pin policy: [localai.torch_family.{variant}] is missing from "
            f"{MATRIX_PATH} (or [{accel.name}] does not list {platform.name}). Fix: add that table (the torch family "
            f"PyPI serves as a CPU build for {platform.machine}), or drop {variant} from the folder's BUILD and re-run "
            f"`./pants localai-import`."
        )
    profile = conventions.profile_of(accel.name)
    if profile is None:
        raise LocalAILayoutError(
            f"{directory}: no LocalAI profile maps to the accelerator '{accel.name}' ([localai.profiles] in {MATRIX_PATH})"
        )
    problems = check_file_names(directory, list(files), conventions)
    if problems:
        raise LocalAILayoutError("\n".join(problems))
    ordered = [(f"{directory}/{name}", files[name]) for name in install_order(profile) if name in files]
    override = conventions.overrides.get(PurePath(directory).name, InstallShOverride())
    index_notes, extra_indexes, url_notes, unpinned = [], [], [], []
    for path, content in ordered:
        checked = check_isolation(
            path, content, accel, conventions.index_aliases.get(accel.name, ()), override.extra_indexes.get(accel.name, ())
        )
        index_notes.extend(checked.notes)
        extra_indexes.extend(checked.extra_indexes)
    read = []
    for path, content in ordered:
        refs = direct_references(path, content, pins)
        read.append((path, refs.content))
        url_notes.extend(refs.notes)
        unpinned.extend(refs.unpinned)
    ordered = read
    try:
        merged = layer_with_origin(ordered)
    except ValueError as e:  # the requirement parser's message names the file and line
        raise LocalAILayoutError(
            f"{directory}: {e}. Fix: write the line as a PEP 508 requirement (`name`, `name==version`, "
            f"`name @ url`), or remove the folder from this tree."
        ) from e
    result = apply_policy(merged, variant, conventions)
    return LayeredRequirements(
        result.requirements,
        tuple(p for p, _ in ordered),
        result.replacements + tuple(index_notes) + tuple(url_notes),
        result.unsatisfied + tuple(unpinned) + override.reasons(PurePath(directory).name, accel.name, variant),
        tuple(dict.fromkeys(extra_indexes)),
    )


@rule
async def load_localai_conventions() -> LocalAIConventions:
    matrix = await Get(AcceleratorMatrix)
    contents = await Get(DigestContents, PathGlobs([MATRIX_PATH]))
    if not contents:
        raise LocalAILayoutError(f"{MATRIX_PATH} is missing")
    return LocalAIConventions.parse(contents[0].content.decode(), matrix)


@rule(desc="Read a LocalAI folder's requirement files", level=LogLevel.DEBUG)
async def read_localai_requirements(request: LocalAIRequirementsRequest) -> LayeredRequirements:
    matrix = await Get(AcceleratorMatrix)
    conventions = await Get(LocalAIConventions)
    pins = await Get(GitPins)
    accel = matrix.get(request.accelerator, context=request.owner)
    contents = await Get(DigestContents, PathGlobs([f"{request.directory}/requirements*.txt"]))
    files = {PurePath(fc.path).name: fc.content.decode() for fc in contents}
    try:
        return variant_requirements(request.directory, files, accel, conventions, pins, platform_with_suffix(request.platform_suffix))
    except LocalAILayoutError as e:
        raise RequirementsFileError(f"{request.owner}: {e}") from e


def rules():
    return collect_rules()
