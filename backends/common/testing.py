"""Helpers for backend unit tests (pure logic only; no model is loaded).

A backend's tests cannot ``import backends.<name>.backend`` (names like ``faster-whisper``
are not identifiers, and the PEX ships the backend as package ``localai_backend``), so they
load it with ``load_backend_module(__file__)``.
"""

import importlib
import importlib.util
import sys
import types
from pathlib import Path


def load_backend_module(test_file: str, module: str = "backend"):
    """Import ``<backend dir>/<module>.py`` as ``localai_backend.<module>``.

    ``test_file`` is a test's ``__file__`` (in ``backends/<name>/tests/``). If a real
    ``localai_backend`` package is importable for that directory (PEX layout), it is used.
    """
    backend_dir = Path(test_file).resolve().parent.parent
    pkg = sys.modules.get("localai_backend")
    if pkg is None or Path(getattr(pkg, "__path__", [""])[0]).resolve() != backend_dir:
        for key in [k for k in sys.modules if k == "localai_backend" or k.startswith("localai_backend.")]:
            del sys.modules[key]
        pkg = types.ModuleType("localai_backend")
        pkg.__path__ = [str(backend_dir)]
        sys.modules["localai_backend"] = pkg
    return importlib.import_module(f"localai_backend.{module}")


class AbortError(Exception):
    def __init__(self, code, details):
        super().__init__(f"{code}: {details}")
        self.code = code
        self.details = details


class FakeContext:
    """Stands in for grpc.ServicerContext in unit tests: abort() raises AbortError."""

    def abort(self, code, details):
        raise AbortError(code, details)

    def is_active(self):
        return True

    def set_code(self, code):
        self.code = code

    def set_details(self, details):
        self.details = details
