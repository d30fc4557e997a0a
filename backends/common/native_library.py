"""Loading a native engine's shared library with ctypes and declaring its C API from one table.

Every binding of a ggml engine (backends/whisper, backends/stablediffusion-ggml) declares its
functions as ``{name: ([argtypes], restype)}``; ``load_library`` opens the file and applies the
table, so a symbol the library does not export fails at load time naming the library, the
symbol and the fix, not at the first call. Which file (the CPU level) is chosen by
``cpu_levels.packaged_library``; ``engine.PackagedLibrary`` joins the two. Standard library only.
"""
from __future__ import annotations

import ctypes
import os
from typing import Mapping, Optional, Sequence, Tuple

Signature = Tuple[Sequence[type], Optional[type]]


class LibraryLoadError(OSError):
    """The library cannot be opened, or lacks a function of its signature table."""


def load_library(path, signatures: Mapping[str, Signature], what: str = "") -> ctypes.CDLL:
    """``ctypes.CDLL(path)`` with ``argtypes``/``restype`` set for every function of ``signatures``."""
    path = os.fspath(path)
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        raise LibraryLoadError(f"{path}: cannot load the {what or 'native'} library: {exc}") from None
    missing = [name for name in signatures if not hasattr(lib, name)]
    if missing:
        raise LibraryLoadError(
            f"{path}: the {what or 'native'} library does not export {', '.join(sorted(missing))}: it is not the "
            "version its binding declares; rebuild the engine it comes from"
        )
    for name, (args, res) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = list(args), res
    return lib
