"""3rdparty/wheelhouse.toml as the plugin reads it: the original URL of each wheelhouse file.

Lockfiles name wheelhouse wheels by Pants' path mapping (`file://${WHEELHOUSE}/cpu/torch-...whl`),
which is portable but not a URL anyone can fetch; the manifest the bootstrap fills the wheelhouse
from records where each file (pinned by sha256) officially comes from. The SBOM names that.
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.engine.fs import DigestContents, PathGlobs
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError

WHEELHOUSE_MANIFEST = "3rdparty/wheelhouse.toml"


class WheelhouseManifestError(LocalAIError):
    pass


@dataclass(frozen=True)
class WheelhouseUrls:
    by_sha256: tuple[tuple[str, str], ...]  # (sha256, official url), sorted

    def mapping(self) -> dict[str, str]:
        return dict(self.by_sha256)


def parse_manifest(content: str, path: str = WHEELHOUSE_MANIFEST) -> WheelhouseUrls:
    import toml  # pants: no-infer-dep (toml comes with pantsbuild.pants)

    try:
        tables = toml.loads(content)
    except toml.TomlDecodeError as e:
        raise WheelhouseManifestError(f"{path}: not TOML ({e}). Fix the file (see its header for the fields).") from e
    return WheelhouseUrls(tuple(sorted((t["sha256"], t["url"]) for t in tables.values() if isinstance(t, dict) and t.get("sha256") and t.get("url"))))


@dataclass(frozen=True)
class WheelhouseUrlsRequest:
    pass


@rule(desc="Read the wheelhouse manifest", level=LogLevel.DEBUG)
async def wheelhouse_urls(_: WheelhouseUrlsRequest) -> WheelhouseUrls:
    contents = await Get(DigestContents, PathGlobs([WHEELHOUSE_MANIFEST]))
    return parse_manifest(contents[0].content.decode()) if contents else WheelhouseUrls(())


def rules():
    return collect_rules()
