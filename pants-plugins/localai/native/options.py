"""[localai-native]: which engine builds go into backends.

Every CPU level of an engine is its own cached build; a backend carries the levels its
`engines=[...]` lists. CI runners that execute only some levels can leave the others out of the
backends (and so out of the build) with `cpu_levels`; `pants package engines/<e>:<level>`
still builds any level.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence, TypeVar

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


def kept_engines(
    variant: str, engines: Sequence[tuple[str, Engine]], levels: Iterable[str], platform_of: Mapping[str, str]
) -> list[Engine]:
    """The engines (given as (cpu level, engine)) of backend variant `variant` that
    `[localai-native].cpu_levels` keeps: all when the option is empty. The option restricts each
    platform it names a level of (`platform_of`: level -> platform); a platform it names none of
    keeps all its levels, so CI's x86_64 levels leave an arm64 variant its own."""
    levels = tuple(levels)
    unknown = sorted(set(levels) - set(CPU_LEVELS))
    if unknown:
        raise CpuLevelOptionError(
            f"[localai-native].cpu_levels names unknown level(s) {unknown}.",
            file=TABLE_PATH,
            fix=f"Use levels of that table: {sorted(CPU_LEVELS)}.",
        )
    if not engines:
        return []  # a backend without engines (the rule then reads no level table: platform_of is empty)
    restricted = {platform_of[level] for level in levels}
    kept = [engine for level, engine in engines if level in levels or platform_of[level] not in restricted]
    if not kept:
        raise CpuLevelOptionError(
            f"[localai-native].cpu_levels={list(levels)} leaves none of its engine levels "
            f"{sorted({level for level, _ in engines})}.",
            target=variant,
            fix="Add one of the backend's levels to the option, or unset it.",
        )
    return kept


def wrong_platform_engines(engines: Sequence[tuple[str, str]], machine: str, platform_of: Mapping[str, str]) -> list[str]:
    """The engines (given as (cpu level, address)) built for another machine than `machine` (a
    backend variant's platform.machine()): a library its CPython could not load."""
    return [f"{address} (cpu_level {level}: {platform_of[level]})" for level, address in engines if platform_of[level] != machine]
