"""espeak-ng from the backend's own folder (the espeakng-loader wheel), never the host's, at any
install path.

kittentts and misaki phonemize through phonemizer's ``EspeakWrapper``, which loads the host's
libespeak-ng unless told otherwise: kittentts 0.1.3 never tells it (without a host espeak-ng its
LoadModel fails), misaki points it at espeakng_loader's copy when imported. That copy then meets
espeak-ng's own limit: the data path is copied into a 160-byte buffer (``N_PATH_HOME``,
libespeak-ng/speech.h) and a longer one, cut short, holds no ``phontab``, on which
``espeak_Initialize`` calls ``exit(1)``: the whole server dies on its first TTS when the folder's
path is over 114 bytes (/site-packages/espeakng_loader/espeak-ng-data adds 45).

So the data directory is opened once and handed to espeak-ng as ``/proc/self/fd/<n>`` through
``ESPEAK_DATA_PATH``, which espeak-ng reads when phonemizer passes no path (phonemizer would
resolve a path it is given back to the long one). Elsewhere (macOS) the path is passed as it is.

phonemizer also loads a private copy of the library for each EspeakBackend (espeak-ng keeps
global state, and dlopen of a file already loaded returns the same handle), which it writes to a
temporary directory: a write outside the folder, and a failed load where nothing is writable.
On Linux the copy is an anonymous memory file instead (memfd_create), opened by dlopen through
``/proc/self/fd/<n>``: each is a file of its own, and nothing reaches a filesystem.
"""

import ctypes
import os
import weakref

N_PATH_HOME = 160  # libespeak-ng/speech.h (Linux, macOS): the data path and its NUL
PROC_FD = "/proc/self/fd"
_data_fd = None


def data_path_for_espeak(data: str) -> str:
    """The path espeak-ng is given for ``data``: a descriptor of it under /proc when there is
    /proc (opened once, held for the process's life), else ``data`` itself."""
    global _data_fd
    if not os.path.isdir(PROC_FD):
        return data
    if _data_fd is None:
        _data_fd = os.open(data, os.O_RDONLY | os.O_DIRECTORY)
    return f"{PROC_FD}/{_data_fd}"


def load_private_copy(library: str) -> tuple[ctypes.CDLL, int]:
    """``library`` loaded from a copy in an anonymous memory file: a separate instance of it,
    written nowhere. Returns it and the file's descriptor, to close once the copy is unloaded:
    dlopen knows a loaded object by the path it was given, so a second copy must not reuse the
    first one's /proc/self/fd/<n> while that one is loaded."""
    fd = os.memfd_create(os.path.basename(library))
    try:
        with open(library, "rb") as src, os.fdopen(os.dup(fd), "wb") as copy:
            copy.write(src.read())
        return ctypes.CDLL(f"{PROC_FD}/{fd}"), fd
    except BaseException:
        os.close(fd)
        raise


def _unload(library: ctypes.CDLL, fd: int) -> None:
    library.espeak_Terminate()
    os.close(fd)


def _copies_in_memory() -> None:
    """Make phonemizer's per-backend copy of libespeak-ng with load_private_copy (Linux)."""
    from phonemizer.backend.espeak import api, wrapper

    if not hasattr(os, "memfd_create") or not os.path.isdir(PROC_FD) or wrapper.EspeakAPI is not api.EspeakAPI:
        return

    class EspeakInMemory(api.EspeakAPI):
        def __init__(self, library, data_path):
            self._library, self._tempdir = None, None
            path = self._shared_library_path(ctypes.cdll.LoadLibrary(str(library)))
            self._library, fd = load_private_copy(str(path))
            weakref.finalize(self, _unload, self._library, fd)
            # 0x02: AUDIO_OUTPUT_SYNCHRONOUS (speak_lib.h)
            if self._library.espeak_Initialize(0x02, 0, None if data_path is None else os.fsencode(data_path), 0) <= 0:
                raise RuntimeError(f"espeak-ng ({path}) failed to initialize")
            self._library_path = path

    wrapper.EspeakAPI = EspeakInMemory


def use_bundled_espeak() -> str:
    """Point phonemizer at the folder's libespeak-ng and data; call after importing misaki (which
    sets its own at import) and before the first EspeakBackend. Returns the data path given."""
    import espeakng_loader
    from phonemizer.backend.espeak.wrapper import EspeakWrapper

    _copies_in_memory()
    EspeakWrapper.set_library(espeakng_loader.get_library_path())
    data = espeakng_loader.get_data_path()
    given = data_path_for_espeak(data)
    if given == data and len(os.fsencode(data)) >= N_PATH_HOME:
        from .errors import FailedPrecondition

        raise FailedPrecondition(
            f"espeak-ng's data path {data} is {len(os.fsencode(data))} bytes, over espeak-ng's limit of "
            f"{N_PATH_HOME - 1}: install the backend folder at a shorter path"
        )
    EspeakWrapper.set_data_path(None if given != data else data)
    if given != data:
        os.environ["ESPEAK_DATA_PATH"] = given
    return given
