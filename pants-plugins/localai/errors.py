"""The one error family of the plugin: every error says what is wrong, where, and the fix.

Pants prints an exception raised in a rule or goal as its message, so a `LocalAIError` reads
"<target or file>: <cause> <fix>" wherever it surfaces. Scripts that run as standalone processes
in the sandbox (the scripts/ folders: oci/scripts/push.py, package/scripts/elf_scan.py,
package/scripts/portable_python_unpack.py, native/scripts/cmake_driver.py) import only the
standard library and keep their own exit messages.
"""
from __future__ import annotations


class LocalAIError(ValueError):
    """A build input is wrong. `cause` may already be the whole message (most callers format it)."""

    def __init__(self, cause: str, *, target: str | None = None, file: str | None = None, fix: str | None = None):
        self.cause, self.target, self.file, self.fix = cause, target, file, fix
        where = ": ".join(x for x in (target, file) if x)
        super().__init__(" ".join(x for x in (f"{where}: {cause}" if where else cause, fix) if x))
