"""The tests' view of engines/minilm/binding.py: the packaged libraries per CPU level, and
embeddings as numpy arrays."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from engines.minilm import binding
from engines.minilm.binding import CODE, CPU_LEVELS, MinilmError, supported  # noqa: F401  (re-exported)


def levels_under_test() -> tuple[str, ...]:
    """The levels these tests check: $MINILM_TEST_LEVELS (comma-separated, set by the test
    target in BUILD: CI builds fewer levels than a machine runs), else every level."""
    named = [v for v in os.environ.get("MINILM_TEST_LEVELS", "").split(",") if v]
    unknown = [v for v in named if v not in CPU_LEVELS]
    if unknown:
        raise ValueError(f"MINILM_TEST_LEVELS names {unknown}, not CPU levels of this platform: {list(CPU_LEVELS)} "
                         "(backends/common/cpu_levels.json); fix the test target's extra_env_vars")
    return tuple(v for v in CPU_LEVELS if v in named) if named else tuple(CPU_LEVELS)


LEVELS = levels_under_test()


def library_path(level: str) -> Path:
    """The packaged library: in a `pants test` sandbox it is at the package's output path
    (runtime_package_dependencies); outside Pants, under $MINILM_DIST (default dist/)."""
    rel = Path("engines/minilm") / level / "libminilm.so"
    for base in (Path("."), Path(os.environ.get("MINILM_DIST", "dist"))):
        if (base / rel).is_file():
            return (base / rel).resolve()
    raise FileNotFoundError(f"{rel} not found: run `pants package engines/minilm:{level}` (or set MINILM_DIST)")


class Model(binding.Model):
    def embed_status(self, texts: list[str]) -> tuple[int, np.ndarray]:
        st, out = super().embed_status(texts)
        return st, np.frombuffer(out, np.float32).reshape(-1, self.n_embd)[: len(texts)].copy()

    def embed(self, texts: list[str]) -> np.ndarray:
        st, out = self.embed_status(texts)
        self.library.check(st)
        return out


class Lib(binding.Library):
    model_class = Model
