"""Shared RuleRunner setup for the plugin's tests."""
from __future__ import annotations

from pathlib import Path

from pants.backend.python.target_types import PythonRequirementTarget
from pants.testutil.rule_runner import RuleRunner


def repo_file(path: str) -> str:
    """A file of the real repository, for tests that check the committed data."""
    return Path(path).read_text()


def make_rule_runner(*query_rules) -> RuleRunner:
    from pants.backend.python import register as python_backend
    from pants.core import register as core

    from localai import register

    return RuleRunner(
        rules=[*core.rules(), *python_backend.rules(), *register.rules(), *query_rules],
        target_types=[*register.target_types(), PythonRequirementTarget],
    )


def backend_files(name: str, accels: dict[str, str], base: str = "grpcio-tools==1.85.1\ntorch\n") -> dict[str, str]:
    """A backend folder written the way the localai_backend macro expands it."""
    files = {
        "3rdparty/accelerators.toml": repo_file("3rdparty/accelerators.toml"),
        f"backends/{name}/requirements.txt": base,
    }
    build = [f'localai_sources(name="src")']
    for accel, overlay in accels.items():
        if overlay is not None:
            files[f"backends/{name}/requirements-{accel}.txt"] = overlay
        build.append(f'localai_requirements(name="requirements-{accel}", accelerator="{accel}")')
        build.append(f'localai_backend_variant(name="{accel}", accelerator="{accel}", dependencies=[":src"])')
    files[f"backends/{name}/BUILD"] = "\n".join(build) + "\n"
    return files


def resolve_options(name: str, accels, *, matrix_pip=None) -> list[str]:
    resolves = {f"{name}-{a}": f"lockfiles/{name}-{a}.lock" for a in accels}
    pip = {f"{name}-{a}": (matrix_pip or {}).get(a, f"3rdparty/accelerators/{a}.txt") for a in accels}
    return [f"--python-resolves={resolves!r}", f"--python-resolves-to-constraints-file={pip!r}"]
