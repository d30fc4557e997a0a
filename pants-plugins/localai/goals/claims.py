"""What each test target proves: the `description` of every `python_tests` target.

docs/status.md lists them (status.py renders `render_catalog`), so the claim sits next to the
test in its BUILD file and the doc cannot drift from it; a test target without a description
is a lint error naming it.
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import AllUnexpandedTargets, DescriptionField, Tags
from pants.util.logging import LogLevel

TESTS_ALIAS = "python_tests"
BY_HAND_TAG = "by-hand"  # left out of `::` by pants.toml's [GLOBAL].tag: not run in CI


@dataclass(frozen=True)
class TestEntry:
    address: str
    description: str | None
    by_hand: bool = False
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class TestCatalog:
    entries: tuple[TestEntry, ...]

    @property
    def undocumented(self) -> tuple[str, ...]:
        return tuple(e.address for e in self.entries if not e.description)


@rule(desc="List test targets and what they prove", level=LogLevel.DEBUG)
async def test_catalog() -> TestCatalog:
    targets = await Get(AllUnexpandedTargets)
    entries = sorted(
        (
            TestEntry(
                t.address.spec,
                " ".join((t[DescriptionField].value or "").split()) or None,
                BY_HAND_TAG in (t[Tags].value or ()),
                tuple(t[Tags].value or ()),
            )
            for t in targets
            if t.alias == TESTS_ALIAS
        ),
        key=lambda e: e.address,
    )
    return TestCatalog(tuple(entries))


def render_catalog(catalog: TestCatalog) -> str:
    lines = [
        "## What each test proves",
        "",
        "From the `description` of each `python_tests` target (`./pants test <target>` runs it).",
        "",
        "| test target | what it proves |",
        "|---|---|",
    ]
    for entry in catalog.entries:
        text = (entry.description or "(undocumented)").replace("|", "\\|")
        if entry.by_hand:
            command = f"./pants --tag=\"['{BY_HAND_TAG}']\" test {entry.address}"
            text = f"**By hand, not in CI** (`{command}`). {text}"
        lines.append(f"| `{entry.address}` | {text} |")
    return "\n".join(lines) + "\n"


def rules():
    return collect_rules()
