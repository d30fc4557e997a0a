"""The accelerator matrix (3rdparty/accelerators.toml) as typed data, loaded through the engine."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Iterable

import toml  # pants: no-infer-dep (toml comes with pantsbuild.pants)

from pants.engine.fs import DigestContents, PathGlobs
from pants.engine.rules import Get, collect_rules, rule
from pants.util.frozendict import FrozenDict

MATRIX_PATH = "3rdparty/accelerators.toml"
# Top-level tables of the matrix file that are not accelerators (read by their own modules).
NOT_ACCELERATORS = ("localai",)  # localai_layout.py: LocalAI's profiles and the pin policy
_REQUIRED = ("index", "pip_options", "capabilities", "platforms", "forbidden", "python", "size_budget_mb")


class AcceleratorMatrixError(ValueError):
    pass


@dataclass(frozen=True)
class Accelerator:
    name: str
    description: str
    index: str
    pip_options: str
    capabilities: tuple[str, ...]
    platforms: tuple[str, ...]
    forbidden: tuple[str, ...]
    python: str
    size_budget_mb: int
    lock_note: str | None = None

    def forbidden_in(self, project_names: Iterable[str]) -> tuple[str, ...]:
        """The names among project_names that this accelerator forbids."""
        return tuple(
            sorted(
                name
                for name in set(project_names)
                if any(fnmatch.fnmatchcase(name.lower(), pat) for pat in self.forbidden)
            )
        )


@dataclass(frozen=True)
class AcceleratorMatrix:
    accelerators: FrozenDict[str, Accelerator]

    @classmethod
    def parse(cls, content: str, path: str = MATRIX_PATH) -> "AcceleratorMatrix":
        try:
            data = toml.loads(content)
        except toml.TomlDecodeError as e:
            raise AcceleratorMatrixError(f"{path}: not valid TOML: {e}") from e
        accels = {}
        for name, table in data.items():
            if name in NOT_ACCELERATORS:
                continue
            missing = [k for k in _REQUIRED if k not in table]
            if missing:
                raise AcceleratorMatrixError(
                    f"{path}: accelerator [{name}] lacks {', '.join(missing)} "
                    f"(every accelerator needs {', '.join(_REQUIRED)})"
                )
            accels[name] = Accelerator(
                name=name,
                description=table.get("description", ""),
                index=table["index"],
                pip_options=table["pip_options"],
                capabilities=tuple(table["capabilities"]),
                platforms=tuple(table["platforms"]),
                forbidden=tuple(table["forbidden"]),
                python=table["python"],
                size_budget_mb=int(table["size_budget_mb"]),
                lock_note=table.get("lock_note"),
            )
        return cls(FrozenDict(accels))

    def get(self, name: str, *, context: str) -> Accelerator:
        if name not in self.accelerators:
            raise AcceleratorMatrixError(
                f"{context}: unknown accelerator '{name}'. Known accelerators "
                f"({MATRIX_PATH}): {', '.join(sorted(self.accelerators))}. Fix the name, or "
                f"declare '{name}' in {MATRIX_PATH}."
            )
        return self.accelerators[name]


@rule
async def load_accelerator_matrix() -> AcceleratorMatrix:
    contents = await Get(
        DigestContents,
        PathGlobs([MATRIX_PATH]),
    )
    if not contents:
        raise AcceleratorMatrixError(f"{MATRIX_PATH} is missing: it declares every accelerator.")
    return AcceleratorMatrix.parse(contents[0].content.decode(), MATRIX_PATH)


def rules():
    return collect_rules()
