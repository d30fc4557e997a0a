"""Plugin modules that also run as processes in the sandbox: the one way to ship their source."""
from __future__ import annotations

import pkgutil

from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import PexRequest
from pants.backend.python.util_rules.pex_requirements import PexRequirements, Resolve
from pants.engine.fs import FileContent

from localai.errors import LocalAIError


def script_file(package: str, name: str, path: str | None = None) -> FileContent:
    """`name` of `package` as a file at `path` in the sandbox (default: `name` at its root)."""
    data = pkgutil.get_data(package, name)
    if data is None:
        raise LocalAIError(f"{package}/{name}: the plugin cannot read its own script", fix="reinstall the plugin sources")
    return FileContent(path or name, data)


def script_venv_request(python_setup: PythonSetup, resolve: str, requirements: tuple[str, ...], output_filename: str, origin: str) -> PexRequest:
    """The VenvPex a script runs with: `requirements`, pinned by `resolve`'s lockfile, on that
    resolve's interpreter constraints."""
    ics = python_setup.resolves_to_interpreter_constraints.get(resolve) or python_setup.interpreter_constraints
    return PexRequest(
        output_filename=output_filename,
        internal_only=True,
        requirements=PexRequirements(requirements, from_superset=Resolve(resolve, False), description_of_origin=origin),
        interpreter_constraints=InterpreterConstraints(ics),
    )
