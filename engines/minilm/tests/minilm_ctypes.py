"""The tests' view of engines/minilm/binding.py: the packaged libraries per CPU level, and
embeddings as numpy arrays."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from engines.minilm import binding
from engines.minilm.binding import CODE, CPU_LEVELS, MinilmError, supported  # noqa: F401  (re-exported)

LEVELS = tuple(CPU_LEVELS)


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
