"""The CPU levels native engines are built for, and which one this machine runs.

The levels are cpu_levels.json next to this file: the one table that the C build also reads
(pants-plugins/localai/native passes it to cmake_driver.py), so the ISA options a level's
library is compiled with and the CPU flags checked here before loading it cannot drift apart
(a library using an instruction the check does not require is a SIGILL on some machine).
Used by every engine's binding (engines/minilm) and every backend that loads an engine.
Standard library only.
"""
from __future__ import annotations

import contextlib
import importlib.resources
import json
import os
from pathlib import Path

from .errors import InvalidArgument, require

TABLE = "cpu_levels.json"


def _load() -> dict[str, set[str]]:
    table = json.loads(importlib.resources.files(__package__).joinpath(TABLE).read_text())
    options = table["ggml_options"]
    return {level: set().union(*(options[o] for o in on)) for level, on in table["levels"].items()}


# {level: the /proc/cpuinfo flags its library needs}, best first.
CPU_LEVELS = _load()


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
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
    return next(level for level, needs in CPU_LEVELS.items() if level in available and needs <= flags)


def packaged_library(package: str, engine_dir: str, library: str, override_env: str,
                     files: contextlib.ExitStack) -> tuple[str, Path]:
    """The best ``<engine_dir>/<level>/<library>`` a backend's PEX carries for this CPU: its level,
    and a real file for ctypes (kept while ``files`` is open)."""
    root = importlib.resources.files(package).joinpath(engine_dir)
    available = [level for level in CPU_LEVELS if root.joinpath(level, library).is_file()]
    require(bool(available), f"this PEX holds no {library} (package it with engines=[...])")
    level = pick_level(available, override_env)
    return level, files.enter_context(importlib.resources.as_file(root.joinpath(level, library)))
