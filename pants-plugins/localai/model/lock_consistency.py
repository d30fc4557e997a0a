"""Whether a lock can install what it was made for: every requirement its packages declare, on
the variant's platform, is met by the version the lock holds.

pex locks with pip 20.3.4 ([python].pip_version), which can write a lock its own install then refuses (LocalAI's
rfdetr: inference 0.11.0 requires opencv-python<=4.8.0.76, the lock held 4.11.0.86; pex failed
at `pants package`, minutes later). This reads the lock alone: from its root requirements, each
reachable package's `requires_dists` whose markers hold for linux on the variant's machine and
CPython (with the extras asked of that package), checked against the locked versions. The
audit (`pants lint`), `localai-platform-lockfiles` (before it writes) and `pants package`
(before pex runs) use it, so an inconsistent lock is named with each broken requirement. A
project the lock was made without (pex's `--exclude`, BUILD `exclude`) is never required.
"""
from __future__ import annotations

import warnings
from collections import deque

from localai.model.lockfile import LockedRequirement, Lockfile

# packaging 21.3 (Pants') uses pyparsing 3's deprecated names: a warning per grammar line in
# Pants' log at import and per parse, unless silenced.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from packaging.markers import Marker  # pants: no-infer-dep (packaging comes with pantsbuild.pants)
    from packaging.requirements import InvalidRequirement, Requirement  # pants: no-infer-dep
    from packaging.utils import canonicalize_name  # pants: no-infer-dep


def marker_environment(machine: str, python: str) -> dict[str, str]:
    """PEP 508's environment for Linux on `machine` (platform.machine()) with CPython `python` (X.Y)."""
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "os_name": "posix",
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": f"{python}.0",
        "python_version": python,
        "sys_platform": "linux",
    }


def _applies(marker: Marker | None, env: dict[str, str], extras: frozenset[str]) -> bool:
    return marker is None or any(marker.evaluate({**env, "extra": e}) for e in sorted(extras | {""}))


def _unsatisfied_in(
    resolve: tuple[LockedRequirement, ...], roots: tuple[str, ...] | None, excluded: frozenset[str], env: dict[str, str], path: str
) -> list[str]:
    locked = {canonicalize_name(r.project_name): r for r in resolve}
    asked: dict[str, set[str]] = {}  # project -> the extras asked of it so far
    todo: deque[str] = deque()  # first asked, first read: lines in the order of the lock's roots
    found: dict[str, None] = {}  # ordered, without repeats (a project is revisited for new extras)

    def need(text: str, who: str, extras: frozenset[str]) -> None:  # who: "<project> <version> requires"
        try:
            req = Requirement(text)
        except InvalidRequirement as e:
            found[f"{who} {text!r}, which is not a PEP 508 requirement ({e})"] = None
            return
        if not _applies(req.marker, env, extras):
            return
        name = canonicalize_name(req.name)
        if name in excluded:  # locked without it (pex's --exclude): the install leaves it out too
            return
        held = locked.get(name)
        if held is None:
            found[f"{who} {req.name}{req.specifier}, which the lock does not hold"] = None
            return
        if req.specifier and not req.specifier.contains(held.version, prereleases=True):
            found[f"{who} {req.name}{req.specifier}, the lock holds {held.project_name} {held.version}"] = None
        new = set(req.extras) - asked.get(name, set())
        if name not in asked or new:
            asked.setdefault(name, set()).update(req.extras)
            todo.append(name)

    # Without its roots recorded, every locked project is one.
    for root in roots if roots is not None else (f"{r.project_name}==={r.version}" for r in resolve):
        need(root, f"{path} is locked for", frozenset())
    while todo:
        held = locked[todo.popleft()]
        extras = frozenset(asked[canonicalize_name(held.project_name)])
        for dist in held.requires_dists:
            need(dist, f"{held.project_name} {held.version} requires", extras)
    return list(found)


def unsatisfied(lockfile: Lockfile, machine: str, python: str) -> tuple[str, ...]:
    """One line per requirement the lock cannot meet on Linux `machine` with CPython `python`."""
    env = marker_environment(machine, python)
    roots = lockfile.roots()
    excluded = frozenset(canonicalize_name(e) for e in lockfile.excluded())
    lines: dict[str, None] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # packaging's parseString (above)
        for resolve in lockfile.resolves():
            lines.update(dict.fromkeys(_unsatisfied_in(resolve, roots, excluded, env, lockfile.path)))
    return tuple(lines)
