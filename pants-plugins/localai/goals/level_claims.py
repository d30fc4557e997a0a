"""Which engine CPU levels a test executes: docs/status.md's "CPU levels" section.

A test target declares `localai-runs-level:<level>` when it runs the engine library built for that
level of backends/common/cpu_levels.json (the level forced, not whatever this machine would pick)
and checks its answers. CI's `pants lint` builds and audits every level its backends carry, but
only a declared test shows that a level's code runs: the section lists, per level, the CI tests
that run it, else the by-hand ones (whose description says why they are by hand).
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.goals.claims import TestCatalog, TestEntry
from localai.native.cpu_levels import TABLE_PATH, CpuLevelTable

RUNS_LEVEL_TAG_PREFIX = "localai-runs-level:"


def levels_run(entry: TestEntry, table: CpuLevelTable) -> tuple[str, ...]:
    """The levels a test target declares it runs; an error naming the target for an unknown one."""
    declared = tuple(t[len(RUNS_LEVEL_TAG_PREFIX):] for t in entry.tags if t.startswith(RUNS_LEVEL_TAG_PREFIX))
    for level in declared:
        if level not in table.levels:
            raise LocalAIError(
                f"the tag '{RUNS_LEVEL_TAG_PREFIX}{level}' names no CPU level of {TABLE_PATH}.",
                target=entry.address,
                fix=f"Use one of {list(table.levels)}, or drop the tag.",
            )
    return declared


def render_levels(catalog: TestCatalog, table: CpuLevelTable) -> str:
    in_ci: dict[str, list[str]] = {level: [] for level in table.levels}
    by_hand: dict[str, list[str]] = {level: [] for level in table.levels}
    for entry in catalog.entries:
        for level in levels_run(entry, table):
            (by_hand if entry.by_hand else in_ci)[level].append(f"`{entry.address}`")
    rows = [
        f"| {level} | {table.platform(level)} | {', '.join(in_ci[level]) or 'no'} | {', '.join(by_hand[level]) or '-'} |"
        for level in table.levels
    ]
    return (
        "\n## CPU levels\n\n"
        f"Every level of {TABLE_PATH} is built for the backends that carry it, and its ELF files are\n"
        "audited, by CI's `pants lint`. **run in CI**: a test CI runs forces that level's library and checks\n"
        f"its answers (tag `{RUNS_LEVEL_TAG_PREFIX}<level>`); where none does, the by-hand tests that run it\n"
        "(their reason is in \"What each test proves\").\n\n"
        "| level | platform | run in CI by | by hand |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )


@dataclass(frozen=True)
class LevelSection:
    markdown: str


@rule(desc="List the CPU levels tests run", level=LogLevel.DEBUG)
async def level_section(table: CpuLevelTable) -> LevelSection:
    return LevelSection(render_levels(await Get(TestCatalog), table))


def rules():
    return collect_rules()
