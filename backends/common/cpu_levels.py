"""The CPU levels native engines are built for, and which one this machine runs.

One table for every engine (engines/minilm, engines/whisper-cpp) and every backend that
loads one: a level's library may use exactly the instructions its flags name, so a machine
missing one of them must not load it (SIGILL). engines/minilm/tests/test_abi_tables.py checks
the table against the ISA options the C build enables per level. Standard library only.
"""
from __future__ import annotations

import contextlib
import importlib.resources
import os
from pathlib import Path

from .errors import InvalidArgument, require

# Best first; the /proc/cpuinfo flags each needs: the instruction sets ggml's options of that
# level compile for (GGML_AVX512 adds -mavx512f/cd/vl/dq/bw).
_AVX2 = {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"}
CPU_LEVELS = {
    "avx512": _AVX2 | {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"},
    "avx2": _AVX2,
    "fallback": set(),
}


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
