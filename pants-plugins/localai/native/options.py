"""[localai-native]: which engine builds go into backends.

Every CPU level of an engine is its own cached build; a backend carries the levels its
`engines=[...]` lists. CI runners that execute only some levels can leave the others out of the
backends (and so out of the build) with `cpu_levels`; `pants package engines/<e>:<level>`
still builds any level.
"""
from __future__ import annotations

from typing import Iterable, Sequence, TypeVar

from pants.option.option_types import StrListOption
from pants.option.subsystem import Subsystem
from pants.util.strutil import help_text

from localai.errors import LocalAIError
from localai.native.cpu_levels import CPU_LEVELS, TABLE_PATH


class NativeSubsystem(Subsystem):
    options_scope = "localai-native"
    help = "How native engines are built into backends."

    cpu_levels = StrListOption(
        default=[],
        help=help_text(
            f"""
            Only these CPU levels (of {TABLE_PATH}) of each engine go into backends. Empty (the
            default): every level the backend's `engines=[...]` lists. .ci/run sets the levels its
            runner can execute; the others are built by hand.
            """
        ),
    )


class CpuLevelOptionError(LocalAIError):
    pass


Engine = TypeVar("Engine")


def kept_engines(variant: str, engines: Sequence[tuple[str, Engine]], levels: Iterable[str]) -> list[Engine]:
    """The engines (given as (cpu level, engine)) of backend variant `variant` that
    `[localai-native].cpu_levels` keeps: all when the option is empty."""
    levels = tuple(levels)
    unknown = sorted(set(levels) - set(CPU_LEVELS))
    if unknown:
        raise CpuLevelOptionError(
            f"[localai-native].cpu_levels names unknown level(s) {unknown}.",
            file=TABLE_PATH,
            fix=f"Use levels of that table: {sorted(CPU_LEVELS)}.",
        )
    if not levels:
        return [engine for _, engine in engines]
    kept = [engine for level, engine in engines if level in levels]
    if engines and not kept:
        raise CpuLevelOptionError(
            f"[localai-native].cpu_levels={list(levels)} leaves none of its engine levels "
            f"{sorted({level for level, _ in engines})}.",
            target=variant,
            fix="Add one of the backend's levels to the option, or unset it.",
        )
    return kept
