"""Git requirements of LocalAI's folders, each pinned to the commit its ref resolved to.

LocalAI writes `git+https://host/repo` (the default branch) or `git+https://host/repo@<tag or
branch>`. pex (measured with 2.1.137) locks such a requirement with the sha256 of the checked-out tree, but keeps
the ref as written: a moved branch or tag then fails the install with a hash mismatch instead of
building what was locked. So `./pants localai-import` asks `git ls-remote` once which commit each
ref names and records it in GIT_PINS_PATH (the URL as the folder writes it -> commit); the
requirement read for the resolve names that commit (`name @ git+https://host/repo@<commit>`), and
the lock then holds the commit and its tree's hash. A URL with no pin (the host was unreachable at
import time) makes the variant not lockable, naming the URL; a pin is never guessed. Re-pinning
is deleting the entry and re-running the import.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import toml  # pants: no-infer-dep (toml comes with pantsbuild.pants)
from pants.core.util_rules.system_binaries import BinaryPathRequest, BinaryPaths
from pants.engine.fs import DigestContents, PathGlobs
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel

from localai.errors import LocalAIError

GIT_PINS_PATH = "3rdparty/localai-git-pins.toml"
PINS_HEADER = (
    "# Written by `./pants localai-import`: the commit each git requirement of LocalAI's folders\n"
    "# resolved to (`git ls-remote`), which the requirement read for the lock names. Do not edit;\n"
    "# to re-pin a URL, delete its line and re-run the import.\n"
)
COMMIT = re.compile(r"^[0-9a-f]{40}$")


class GitPinsError(LocalAIError):
    pass


@dataclass(frozen=True)
class GitUrl:
    """`git+<scheme>://<host>/<path>[@<ref>][#<fragment>]`, split."""

    repository: str  # what git clones: the URL without `git+`, ref and fragment
    ref: str | None
    fragment: str

    @classmethod
    def parse(cls, url: str) -> "GitUrl":
        parts = urlsplit(url[len("git+"):] if url.startswith("git+") else url)
        path, ref = parts.path, None
        if "@" in path:
            path, ref = path.rsplit("@", 1)
        return cls(urlunsplit((parts.scheme, parts.netloc, path, "", "")), ref or None, parts.fragment)

    def pinned(self, commit: str | None) -> str:
        """The URL naming ``commit`` (None: its own ref). A `file:` URL gets the host `localhost`:
        pip 20.3.4's requirement parser refuses a direct reference with an empty host (`git+file:///...`)."""
        parts = urlsplit(self.repository)
        netloc = parts.netloc or ("localhost" if parts.scheme == "file" else "")
        ref = commit or self.ref
        url = "git+" + urlunsplit((parts.scheme, netloc, parts.path, "", "")) + (f"@{ref}" if ref else "")
        return url + (f"#{self.fragment}" if self.fragment else "")


def is_git_url(url: str) -> bool:
    return url.startswith("git+")


@dataclass(frozen=True)
class GitPins:
    commits: FrozenDict[str, str]  # the git URL as a folder writes it -> the commit it resolved to

    @classmethod
    def parse(cls, content: str, path: str = GIT_PINS_PATH) -> "GitPins":
        try:
            table = toml.loads(content).get("pins", {})
        except toml.TomlDecodeError as e:
            raise GitPinsError(f"{path}: not TOML ({e}). Fix: delete the file and re-run `./pants localai-import`.") from e
        bad = sorted(url for url, commit in table.items() if not COMMIT.match(str(commit)))
        if bad:
            raise GitPinsError(
                f"{path}: {', '.join(bad)}: not a 40-hex commit. Fix: delete the line and re-run `./pants localai-import`."
            )
        return cls(FrozenDict(sorted(table.items())))

    def render(self) -> str:
        lines = [PINS_HEADER, "[pins]"]
        lines += [f"{toml.dumps({url: commit}).strip()}" for url, commit in sorted(self.commits.items())]
        return "\n".join(lines) + "\n"

    def with_pins(self, new: dict[str, str]) -> "GitPins":
        return GitPins(FrozenDict(sorted({**self.commits, **new}.items())))

    def pin(self, url: str) -> str | None:
        """``url`` naming its pinned commit; None when it has no pin. A ref that is already a
        commit is its own pin."""
        git = GitUrl.parse(url)
        if git.ref and COMMIT.match(git.ref):
            return git.pinned(git.ref)
        commit = self.commits.get(url)
        return git.pinned(commit) if commit else None


NO_PINS = GitPins(FrozenDict())


def commit_of(ls_remote_output: str, ref: str | None) -> str | None:
    """The commit `git ls-remote <repo> <ref>` names: a tag's peeled commit (`^{}`) first."""
    rows = [line.split("\t", 1) for line in ls_remote_output.splitlines() if "\t" in line]
    peeled = [sha for sha, name in rows if name.endswith("^{}")]
    plain = [sha for sha, name in rows if not name.endswith("^{}")]
    if ref is None:
        plain = [sha for sha, name in rows if name == "HEAD"]
    found = peeled or plain
    return found[0] if found and COMMIT.match(found[0]) else None


@dataclass(frozen=True)
class GitRefsRequest:
    urls: tuple[str, ...]  # git URLs as the folders write them


@dataclass(frozen=True)
class ResolvedGitRefs:
    commits: FrozenDict[str, str]  # url -> commit, for those git could resolve
    failures: FrozenDict[str, str]  # url -> why not


@rule(desc="Pin git requirements to commits (git ls-remote)", level=LogLevel.DEBUG)
async def resolve_git_refs(request: GitRefsRequest) -> ResolvedGitRefs:
    git = await Get(BinaryPaths, BinaryPathRequest(binary_name="git", search_path=("/usr/bin", "/bin", "/usr/local/bin")))
    if not git.first_path:
        return ResolvedGitRefs(FrozenDict(), FrozenDict({u: "git is not installed here" for u in request.urls}))
    parsed_urls = [GitUrl.parse(url) for url in request.urls]
    results = await MultiGet(
        Get(
            FallibleProcessResult,
            Process(
                (git.first_path.path, "ls-remote", parsed.repository, parsed.ref or "HEAD"),
                description=f"git ls-remote {parsed.repository} {parsed.ref or 'HEAD'}",
                env={"GIT_TERMINAL_PROMPT": "0"},
                cache_scope=ProcessCacheScope.PER_SESSION,  # a branch moves: ask again on each import
                level=LogLevel.DEBUG,
            ),
        )
        for parsed in parsed_urls
    )
    commits, failures = {}, {}
    for url, parsed, result in zip(request.urls, parsed_urls, results):
        commit = commit_of(result.stdout.decode(), parsed.ref) if result.exit_code == 0 else None
        if commit:
            commits[url] = commit
        else:
            detail = result.stderr.decode().strip().splitlines()
            failures[url] = (
                f"`git ls-remote {parsed.repository} {parsed.ref or 'HEAD'}` "
                + (f"failed: {detail[0]}" if detail else "named no commit")
            )
    return ResolvedGitRefs(FrozenDict(commits), FrozenDict(failures))


@rule(desc="Read the git pins of LocalAI's folders", level=LogLevel.DEBUG)
async def read_git_pins() -> GitPins:
    contents = await Get(DigestContents, PathGlobs([GIT_PINS_PATH]))
    return GitPins.parse(contents[0].content.decode()) if contents else NO_PINS


def rules():
    return collect_rules()
