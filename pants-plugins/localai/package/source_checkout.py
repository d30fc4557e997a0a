"""Where the sources of a build come from, for its provenance: the git commit of the checkout
the build runs in, read outside the sandbox by Pants' own uncacheable git rule (the build itself
stays hermetic: no sandboxed step reads .git), and the repository's URI from an option, not from
`remote.origin.url`: two clones of one commit, whatever their remotes, give identical artifacts.

No checkout (an exported tree, a temporary test repository, git missing): the provenance says so.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from pants.base.build_environment import get_buildroot
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel
from pants.vcs.git import GitWorktreeRequest, MaybeGitWorktree

from localai.package.options import SourceRepositorySubsystem

logger = logging.getLogger(__name__)

NO_CHECKOUT = "no checkout: built outside a git work tree, so no commit is named"


@dataclass(frozen=True)
class SourceCheckout:
    repository: str  # "" when no option gives it
    commit: str  # "" when not built in a git checkout
    note: str = ""  # why there is no commit, or that the work tree had uncommitted changes

    def material(self) -> dict:
        """SLSA v1 resolvedDependency of the sources."""
        uri = f"git+{self.repository}" if self.repository else "git+unknown-repository"
        if not self.commit:
            return {"uri": uri, "annotations": {"localai:source": self.note or NO_CHECKOUT}}
        return {"uri": f"{uri}@{self.commit}", "digest": {"gitCommit": self.commit},
                **({"annotations": {"localai:source": self.note}} if self.note else {})}


@dataclass(frozen=True)
class SourceCheckoutRequest:
    pass


@rule(desc="Read the source commit", level=LogLevel.DEBUG)
async def source_checkout(_: SourceCheckoutRequest, subsystem: SourceRepositorySubsystem) -> SourceCheckout:
    # MaybeGitWorktree is uncacheable: read again in every run, never from a cache.
    worktree = (await Get(MaybeGitWorktree, GitWorktreeRequest())).git_worktree
    repository = subsystem.repository.rstrip("/")
    build_root = get_buildroot()
    if worktree is None or Path(worktree.worktree).resolve() != Path(build_root).resolve():
        return SourceCheckout(repository, "", NO_CHECKOUT)
    try:
        commit = worktree.commit_id
        dirty = bool(worktree.changed_files(include_untracked=False))
    except Exception as e:  # a work tree with no commit yet, or git failing
        logger.info(f"git in {build_root}: {e!r}")
        return SourceCheckout(repository, "", f"{NO_CHECKOUT} ({e.__class__.__name__})")
    return SourceCheckout(repository, commit, "the work tree had uncommitted changes to tracked files" if dirty else "")


def rules():
    return (*collect_rules(), *SourceRepositorySubsystem.rules())
