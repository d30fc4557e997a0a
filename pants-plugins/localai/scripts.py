"""Plugin modules that also run as processes in the sandbox: the one way to ship their source."""
from __future__ import annotations

import pkgutil

from pants.engine.fs import FileContent

from localai.errors import LocalAIError


def script_file(package: str, name: str, path: str | None = None) -> FileContent:
    """`name` of `package` as a file at `path` in the sandbox (default: `name` at its root)."""
    data = pkgutil.get_data(package, name)
    if data is None:
        raise LocalAIError(f"{package}/{name}: the plugin cannot read its own script", fix="reinstall the plugin sources")
    return FileContent(path or name, data)
