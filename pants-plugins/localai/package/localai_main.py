"""Runs an imported LocalAI folder's backend.py as LocalAI's `python backend.py` does.

Shipped into the PEX as localai_backend/__main__.py (the PEX's entry point is the package
`localai_backend`). `python backend.py` puts backend.py's own directory first on sys.path: its
sibling modules (insightface's engines.py) and sibling packages (tinygrad's tool_parsers/) import
by their bare names, and `__file__` is backend.py, so its `../common` insert finds LocalAI's
helpers. Standard library only: it runs inside the backend's PEX.
"""
import os
import runpy
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_BACKEND = os.path.join(_HERE, "backend.py")

if __name__ == "__main__":
    sys.path.insert(0, _HERE)
    sys.argv[0] = _BACKEND
    runpy.run_path(_BACKEND, run_name="__main__")
