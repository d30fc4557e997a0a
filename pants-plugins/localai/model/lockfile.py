"""Pants/pex lockfiles: reading one from the workspace, and the one parser of their contents.

A lockfile is JSON after Pants' `//` header lines. Every reader in the plugin (audit, export,
SBOM, status, gallery, the LocalAI report) goes through `Lockfile` here.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from pants.engine.fs import DigestContents, PathGlobs
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError


class LockfileFormatError(LocalAIError):
    pass


@dataclass(frozen=True)
class LockedArtifact:
    url: str
    algorithm: str
    hash: str


@dataclass(frozen=True)
class LockedRequirement:
    project_name: str
    version: str
    artifacts: tuple[LockedArtifact, ...]
    requires_dists: tuple[str, ...] = ()  # PEP 508 strings, as the lock records them

    def artifact_named(self, filename: str) -> LockedArtifact | None:
        """The artifact whose URL ends with `filename` (pex 2.1.137 quoted `+` as `%2B` in URLs, pex 2.105.2 does not)."""
        return next((a for a in self.artifacts if unquote(a.url.rsplit("/", 1)[-1]) == filename), None)


def lockfile_json(content: bytes) -> dict[str, Any]:
    return json.loads("\n".join(l for l in content.decode().splitlines() if not l.startswith("//")))


def _format_error(path: str, e: Exception) -> LockfileFormatError:
    return LockfileFormatError(f"{path}: not a Pants lockfile ({e!r}); regenerate it with `./pants generate-lockfiles`")


def _locked_requirement(req: dict[str, Any]) -> LockedRequirement:
    return LockedRequirement(
        req["project_name"],
        req["version"],
        tuple(sorted((LockedArtifact(a["url"], a["algorithm"], a["hash"]) for a in req["artifacts"]), key=lambda a: a.url)),
        tuple(sorted(req.get("requires_dists", ()))),
    )


def parse(content: bytes, path: str) -> tuple[LockedRequirement, ...]:
    """Every (project, version) of every locked resolve, sorted by name then version; the
    artifacts of a project locked in several resolves at one version are merged."""
    found: dict[tuple[str, str], set[LockedArtifact]] = {}
    requires: dict[tuple[str, str], set[str]] = {}
    for resolve in parse_resolves(content, path):
        for req in resolve:
            key = (req.project_name, req.version)
            found.setdefault(key, set()).update(req.artifacts)
            requires.setdefault(key, set()).update(req.requires_dists)
    return tuple(
        LockedRequirement(name, version, tuple(sorted(arts, key=lambda a: a.url)), tuple(sorted(requires[(name, version)])))
        for (name, version), arts in sorted(found.items())
    )


def parse_resolves(content: bytes, path: str) -> tuple[tuple[LockedRequirement, ...], ...]:
    """Each locked resolve on its own (a strict lock has one per platform; a universal one, one)."""
    try:
        return tuple(
            tuple(_locked_requirement(req) for req in resolve["locked_requirements"])
            for resolve in lockfile_json(content)["locked_resolves"]
        )
    except (ValueError, KeyError, TypeError) as e:
        raise _format_error(path, e) from e


def parse_excluded(content: bytes, path: str) -> tuple[str, ...]:
    """The projects the lock was made without (pex's `lock create --exclude`), with what only they need."""
    try:
        return tuple(lockfile_json(content).get("excluded", ()))
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # AttributeError: JSON that is not an object
        raise _format_error(path, e) from e


def parse_roots(content: bytes, path: str) -> tuple[str, ...] | None:
    """The requirements the lock was made for (PEP 508 strings): what an install starts from;
    None when the lock does not record them."""
    try:
        roots = lockfile_json(content).get("requirements")
        return None if roots is None else tuple(roots)
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # AttributeError: JSON that is not an object
        raise _format_error(path, e) from e


@dataclass(frozen=True)
class Lockfile:
    path: str
    sha256: str
    content: bytes

    @classmethod
    def of(cls, path: str, content: bytes) -> "Lockfile":
        return cls(path, hashlib.sha256(content).hexdigest(), content)

    def requirements(self) -> tuple[LockedRequirement, ...]:
        return parse(self.content, self.path)

    def resolves(self) -> tuple[tuple[LockedRequirement, ...], ...]:
        return parse_resolves(self.content, self.path)

    def roots(self) -> tuple[str, ...] | None:
        return parse_roots(self.content, self.path)

    def excluded(self) -> tuple[str, ...]:
        return parse_excluded(self.content, self.path)

    def versions(self) -> tuple[tuple[str, str], ...]:
        """(project, version) pairs."""
        return tuple((r.project_name, r.version) for r in self.requirements())

    def projects(self) -> tuple[str, ...]:
        return tuple(sorted({r.project_name for r in self.requirements()}))


@dataclass(frozen=True)
class LockfileRequest:
    path: str


@dataclass(frozen=True)
class MaybeLockfile:
    lockfile: Lockfile | None


@rule(desc="Read a lockfile", level=LogLevel.DEBUG)
async def read_lockfile(request: LockfileRequest) -> MaybeLockfile:
    contents = await Get(DigestContents, PathGlobs([request.path]))
    return MaybeLockfile(Lockfile.of(request.path, contents[0].content) if contents else None)


def rules():
    return collect_rules()
