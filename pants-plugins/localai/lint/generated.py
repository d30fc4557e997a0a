"""`pants lint` checks that every generated file is current (docs/status.md, pants.toml's resolve
blocks and the pip options files they name): one result shape, current or naming the file and
the command that regenerates it."""
from __future__ import annotations

from dataclasses import dataclass

from pants.core.goals.lint import LintResult, LintTargetsRequest
from pants.core.util_rules.partitions import PartitionerType
from pants.engine.fs import DigestContents, PathGlobs
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import FieldSet
from pants.option.option_types import SkipOption
from pants.option.subsystem import Subsystem
from pants.util.logging import LogLevel

from localai.goals.claims import BY_HAND_TAG
from localai.goals.prelock_inputs import PrelockInputs, PrelockInputsRequest
from localai.goals.resolves import (
    GOAL,
    PANTS_TOML,
    DeclaredResolves,
    PantsTomlSourceField,
    PantsTomlUpdate,
    ResolveEntry,
    accelerator_options_of,
    option_lines,
    orphan_lines,
)
from localai.goals.status import BY_HAND_REASON, STATUS_PATH, StatusDoc, StatusDocSourceField
from localai.model.prelock import regenerate, split_pin_block
from localai.target_types import GeneratedFileSourceField


def generated_file_result(linter_name: str, path: str, *, current: bool, regenerate: str, problems: str = "") -> LintResult:
    """`problems`: reasons the file cannot be regenerated as is (they fail the check and are printed instead)."""
    if problems:
        message = problems
    elif current:
        message = f"{path} is up to date\n"
    else:
        message = f"{path} is stale or missing: run `{regenerate}`\n"
    return LintResult(exit_code=0 if current and not problems else 1, stdout=message, stderr="", linter_name=linter_name)


class GeneratedCheckSubsystem(Subsystem):
    options_scope = name = "localai-generated-check"
    help = f"Checks in `pants lint` that the generated files ({STATUS_PATH}, {PANTS_TOML}'s resolve entries) are current."
    skip = SkipOption("lint")


@dataclass(frozen=True)
class GeneratedFileFieldSet(FieldSet):
    required_fields = (GeneratedFileSourceField,)
    source: GeneratedFileSourceField


class GeneratedCheckRequest(LintTargetsRequest):
    field_set_type = GeneratedFileFieldSet
    tool_subsystem = GeneratedCheckSubsystem
    partitioner_type = PartitionerType.DEFAULT_SINGLE_PARTITION  # each check reads the whole build graph once


async def check_status() -> LintResult:
    doc, committed = await MultiGet(Get(StatusDoc), Get(DigestContents, PathGlobs([STATUS_PATH])))
    current = committed[0].content.decode() if committed else None
    problems = "".join(
        f"{address}: test target without a description: say what it proves in `description=` in its BUILD file\n"
        for address in doc.undocumented_tests
    ) + "".join(
        f"{address}: tagged '{BY_HAND_TAG}' (CI never runs it) but its description gives no reason: add a sentence "
        f"starting '{BY_HAND_REASON} ...' to `description=` in its BUILD file\n"
        for address in doc.by_hand_without_reason
    )
    return generated_file_result(
        GeneratedCheckRequest.tool_name, STATUS_PATH, current=current == doc.content, regenerate="./pants localai-status", problems=problems
    )


async def prelock_problems(entries: tuple[ResolveEntry, ...], update: PantsTomlUpdate) -> list[str]:
    """A prelocked variant's pins are there and were resolved from what its resolve is now."""
    def fix(e: ResolveEntry) -> str:
        return f"Fix: run `{regenerate(e.resolve)}`, then `./pants generate-lockfiles --resolve={e.resolve}`, and commit both files."

    problems, pinned = [], []
    for e in entries:
        if e.prelock and e.pip_options in update.files:
            _, pins = split_pin_block(update.files[e.pip_options], path=e.pip_options, resolve=e.resolve)
            if pins is None:
                problems.append(f"{e.pip_options}: {e.directory}/BUILD sets prelock but the file has no pins yet. {fix(e)}")
            else:
                pinned.append((e, pins))
    if not pinned:
        return problems
    by_path = await accelerator_options_of([e for e, _ in pinned])
    inputs = await MultiGet(
        Get(PrelockInputs, PrelockInputsRequest(e.resolve, option_lines(e, by_path[e.accelerator_pip_options]))) for e, _ in pinned
    )
    for (e, pins), now in zip(pinned, inputs):
        if pins.inputs != now.digest:
            problems.append(
                f"{e.pip_options}: its pins are stale: the requirements, pip options, indexes or target of "
                f"{e.resolve} changed since uv resolved them. {fix(e)}"
            )
    return problems


async def check_resolves() -> LintResult:
    declared = await Get(DeclaredResolves)
    update = await Get(PantsTomlUpdate, DeclaredResolves, declared)
    stale = sorted(update.changed_files())
    pins = await prelock_problems(declared.entries, update)
    return generated_file_result(
        GeneratedCheckRequest.tool_name,
        ", ".join([PANTS_TOML, *stale]) if stale else PANTS_TOML,
        current=update.updated == update.current and not stale,
        regenerate=GOAL,
        problems="".join(line + "\n" for line in [*orphan_lines(update), *pins]),
    )


@rule(desc="Check the generated files", level=LogLevel.DEBUG)
async def check_generated(request: GeneratedCheckRequest.Batch) -> LintResult:
    results = []
    for field_set in request.elements:  # each file's check, by the field its target owns the file with
        if isinstance(field_set.source, StatusDocSourceField):
            results.append(await check_status())
        elif isinstance(field_set.source, PantsTomlSourceField):
            results.append(await check_resolves())
    return LintResult(
        exit_code=max((r.exit_code for r in results), default=0),
        stdout="".join(r.stdout for r in results),
        stderr="",
        linter_name=GeneratedCheckRequest.tool_name,
    )


def rules():
    return (*collect_rules(), *GeneratedCheckRequest.rules())
