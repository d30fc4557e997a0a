"""The CPU levels of engine builds, as the plugin sees them: backends/common/cpu_levels.json.

One table, owned by backends/common (the runtime reads it there to pick a library). The plugin
reads it twice, both times from that file:
- its level names when the plugin loads: the `cpu_level` choices of `native_engine` and
  `LOCALAI_CPU_LEVELS`, the localai_engine macro's default (pantsd restarts when the file
  changes: pants.toml `pantsd_invalidation_globs`);
- its `platforms` (which levels are x86_64's, which aarch64's): a level's platform picks the zig
  target of every process of its build (the objects step of a third-party engine too);
- its bytes through the engine for every build (`CpuLevelTable`): an input of every ggml and
  engine process, which cmake_driver.py turns into ISA options, so editing it rebuilds them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pants.engine.fs import Digest, DigestContents, PathGlobs
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError

TABLE_PATH = "backends/common/cpu_levels.json"
_BUILD_ROOT = Path(__file__).resolve().parents[3]


class CpuLevelTableError(LocalAIError):
    pass


def level_names(content: bytes | str, origin: str = TABLE_PATH) -> tuple[str, ...]:
    """The table's level names, best first."""
    try:
        levels = json.loads(content)["levels"]
    except (ValueError, KeyError, TypeError) as e:
        raise CpuLevelTableError(f"{origin}: not a CPU level table ({e!r}); expected {{\"levels\": {{name: [...]}}}}") from e
    if not levels:
        raise CpuLevelTableError(f"{origin}: `levels` is empty")
    return tuple(levels)


def level_platforms(content: bytes | str, origin: str = TABLE_PATH) -> dict[str, str]:
    """{level: its platform} (platform.machine() names: x86_64, aarch64), from the table's
    `platforms`; every level belongs to exactly one."""
    names = level_names(content, origin)
    try:
        platforms = json.loads(content)["platforms"]
        owners = {level: [p for p, spec in platforms.items() if level in spec["levels"]] for level in names}
    except (KeyError, TypeError) as e:
        raise CpuLevelTableError(f"{origin}: no `platforms` {{name: {{\"levels\": [...]}}}} ({e!r})") from e
    wrong = {level: found for level, found in owners.items() if len(found) != 1}
    if wrong:
        raise CpuLevelTableError(f"{origin}: every level must belong to exactly one platform of `platforms`; {wrong}")
    return {level: found[0] for level, found in owners.items()}


def _names_at_load() -> tuple[str, ...]:
    path = _BUILD_ROOT / TABLE_PATH
    try:
        return level_names(path.read_bytes(), str(path))
    except OSError as e:
        raise CpuLevelTableError(f"{path}: cannot read the CPU level table ({e.strerror}); the localai "
                                 f"native plugin expects it at {TABLE_PATH} of the repository") from e


CPU_LEVELS = _names_at_load()


@dataclass(frozen=True)
class CpuLevelTable:
    digest: Digest  # TABLE_PATH, at its repository path
    levels: tuple[str, ...]
    platforms: tuple[tuple[str, str], ...] = ()  # (level, platform)

    def platform(self, level: str) -> str:
        return dict(self.platforms)[level]

    def check(self, level: str, owner: str) -> None:
        if level not in self.levels:
            raise CpuLevelTableError(
                f"{owner}: cpu_level={level!r} is not a level of {TABLE_PATH} ({', '.join(self.levels)}): "
                "use one of those, or add the level to the table"
            )


@rule(desc="Read the CPU level table", level=LogLevel.DEBUG)
async def cpu_level_table() -> CpuLevelTable:
    digest = await Get(Digest, PathGlobs([TABLE_PATH]))
    contents = await Get(DigestContents, Digest, digest)
    if not contents:
        raise CpuLevelTableError(f"{TABLE_PATH} does not exist: the native engines' CPU levels are defined there")
    content = contents[0].content
    return CpuLevelTable(digest, level_names(content), tuple(level_platforms(content).items()))


def rules():
    return collect_rules()
