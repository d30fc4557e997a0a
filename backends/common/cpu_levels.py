"""The CPU levels native engines are built for, and which one this machine runs.

The levels are cpu_levels.json next to this file: the one table that the C build also reads
(pants-plugins/localai/native passes it to cmake_driver.py), so the ISA options a level's
library is compiled with and the CPU flags checked here before loading it cannot drift apart
(a library using an instruction the check does not require is a SIGILL on some machine).
Levels belong to a platform (the table's `platforms`: x86_64 reads /proc/cpuinfo `flags`,
aarch64 its `Features`); CPU_LEVELS holds the levels of the machine this runs on.
Used by every engine's binding (engines/minilm) and every backend that loads an engine.
Standard library only.
"""
from __future__ import annotations

import contextlib
import importlib.resources
import json
import os
import platform
from pathlib import Path

from .errors import InvalidArgument, require

TABLE = "cpu_levels.json"


def _table() -> dict:
    return json.loads(importlib.resources.files(__package__).joinpath(TABLE).read_text())


def _needs(table: dict, level: str) -> set[str]:
    """The /proc/cpuinfo names a level's library needs: its x86 ISA options' flags, or its ARM
    features' `Features` names."""
    known = {**table["ggml_options"], **{f: v["cpuinfo"] for f, v in table["ggml_arm_features"].items()}}
    return set().union(*(known[o] for o in table["levels"][level]))


def levels_of(machine: str, table: dict | None = None) -> dict[str, set[str]]:
    """{level: the CPU flags its library needs}, best first, for one platform (platform.machine()
    names: x86_64, aarch64); empty for a platform the table does not build for."""
    table = _table() if table is None else table
    names = table["platforms"].get(machine, {}).get("levels", [])
    return {level: _needs(table, level) for level in table["levels"] if level in names}


MACHINE = platform.machine()
# {level: the /proc/cpuinfo flags its library needs}, best first, for the machine this runs on.
CPU_LEVELS = levels_of(MACHINE)
# The /proc/cpuinfo line naming the CPU's features: `flags` on x86_64, `Features` on aarch64.
CPUINFO_FIELD = _table()["platforms"].get(MACHINE, {}).get("cpuinfo_field", "flags")


def cpu_flags() -> set[str]:
    """The features /proc/cpuinfo lists for this CPU. Under qemu-user the file is the host's (no
    `Features` line on an emulated aarch64): the empty set, so only a level needing nothing (the
    aarch64 baseline, whose NEON the arm64 ABI guarantees) is picked."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == CPUINFO_FIELD:
                return set(value.split())
    except OSError:
        pass
    return set()


def supported(level: str) -> bool:
    return CPU_LEVELS[level] <= cpu_flags()


def pick_level(available: list[str], override_env: str, flags: set[str] | None = None) -> str:
    """The best of ``available`` this CPU runs; ``$override_env`` forces one (InvalidArgument if absent)."""
    override = os.environ.get(override_env)
    if override:
        if override not in available:
            raise InvalidArgument(f"{override_env}={override}: not one of {available}")
        return override
    flags = cpu_flags() if flags is None else flags
    runnable = [level for level, needs in CPU_LEVELS.items() if level in available and needs <= flags]
    require(bool(runnable), f"none of the CPU levels {available} runs on this {MACHINE} CPU "
            f"(levels of this platform: {list(CPU_LEVELS)}); set {override_env} to force one")
    return runnable[0]


def packaged_library(package: str, engine_dir: str, library: str, override_env: str,
                     files: contextlib.ExitStack) -> tuple[str, Path]:
    """The best ``<engine_dir>/<level>/<library>`` a backend's PEX carries for this CPU: its level,
    and a real file for ctypes (kept while ``files`` is open)."""
    root = importlib.resources.files(package).joinpath(engine_dir)
    available = [level for level in CPU_LEVELS if root.joinpath(level, library).is_file()]
    require(bool(available), f"this PEX holds no {library} (package it with engines=[...])")
    level = pick_level(available, override_env)
    return level, files.enter_context(importlib.resources.as_file(root.joinpath(level, library)))
