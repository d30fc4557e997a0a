"""ctypes binding of include/minilm.h, the engine's flat C ABI (standard library only).

One binding for every caller: the minilm-ggml backend, the engine's tests, fuzzers and benchmark.
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path

from backends.common.cpu_levels import CPU_LEVELS, cpu_flags, supported  # noqa: F401 (re-exported)

# minilm_status (include/minilm.h).
STATUS = {
    0: "MINILM_OK",
    1: "MINILM_ERR_INVALID_ARGUMENT",
    2: "MINILM_ERR_FILE_NOT_FOUND",
    3: "MINILM_ERR_BAD_FORMAT",
    4: "MINILM_ERR_WRONG_ARCH",
    5: "MINILM_ERR_EMPTY_BATCH",
    6: "MINILM_ERR_INVALID_UTF8",
    7: "MINILM_ERR_OUT_OF_MEMORY",
    8: "MINILM_ERR_COMPUTE",
    9: "MINILM_ERR_INTERNAL",
}
CODE = {v: k for k, v in STATUS.items()}

def c_string(text: str) -> bytes:
    """The ABI takes NUL-terminated UTF-8; U+0000 is dropped by the BERT normaliser anyway, so
    removing it keeps the same meaning as the Python tokenizer's input."""
    return text.replace("\x00", "").encode("utf-8", "surrogatepass")


class Params(ctypes.Structure):
    _fields_ = [("n_threads", ctypes.c_int32), ("max_tokens", ctypes.c_int32), ("normalize", ctypes.c_int32)]


class MinilmError(Exception):
    def __init__(self, code: int, msg: str):
        super().__init__(f"{STATUS.get(code, code)}: {msg}")
        self.code = code


class Model:
    """A minilm_context: init/free pair, embedding and tokenization.

    A context is not thread-safe (minilm.h) and ctypes releases the GIL during a call, so
    every call into it, free included, holds the model's lock.
    """

    def __init__(self, lib: "Library", ctx: int):
        self.library, self.ctx = lib, ctx
        self.n_embd = lib.lib.minilm_n_embd(ctx)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self.ctx:
                self.library.lib.minilm_free(self.ctx)
                self.ctx = None

    def _context(self) -> int:
        if not self.ctx:
            raise MinilmError(CODE["MINILM_ERR_INVALID_ARGUMENT"], "model is closed")
        return self.ctx

    def __del__(self):
        self.close()

    def embed_status(self, texts: list[str]) -> tuple[int, ctypes.Array]:
        """minilm_embed's status and output buffer (n_texts x n_embd floats, row-major)."""
        arr = (ctypes.c_char_p * max(1, len(texts)))(*[c_string(t) for t in texts])
        out = (ctypes.c_float * (max(1, len(texts)) * self.n_embd))()
        with self._lock:
            st = self.library.lib.minilm_embed(self._context(), arr, len(texts), out, len(texts) * self.n_embd)
        return st, out

    def embed(self, texts: list[str]) -> list[list[float]]:
        st, out = self.embed_status(texts)
        self.library.check(st)
        n = self.n_embd
        return [out[i * n:(i + 1) * n] for i in range(len(texts))]

    def count_tokens(self, text: str | bytes) -> int:
        b = text if isinstance(text, bytes) else c_string(text)
        n = ctypes.c_int32(0)
        with self._lock:
            self.library.check(self.library.lib.minilm_tokenize(self._context(), b, None, 0, ctypes.byref(n)))
        return n.value

    def tokenize(self, text: str | bytes) -> list[int]:
        b = text if isinstance(text, bytes) else c_string(text)
        n = self.count_tokens(b)
        ids = (ctypes.c_int32 * n)()
        with self._lock:
            self.library.check(self.library.lib.minilm_tokenize(self._context(), b, ids, n, ctypes.byref(ctypes.c_int32(0))))
        return list(ids)


class Library:
    """A loaded libminilm.so with the ABI's signatures declared."""

    model_class = Model  # what load() returns: subclasses may return a richer Model

    def __init__(self, path: Path | str):
        lib = ctypes.CDLL(str(path))
        lib.minilm_default_params.restype = Params
        lib.minilm_init_from_file.restype = ctypes.c_void_p
        lib.minilm_init_from_file.argtypes = [ctypes.c_char_p, Params, ctypes.POINTER(ctypes.c_int)]
        lib.minilm_free.argtypes = [ctypes.c_void_p]
        lib.minilm_n_embd.argtypes = [ctypes.c_void_p]
        lib.minilm_n_embd.restype = ctypes.c_int32
        lib.minilm_embed.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int32,
                                     ctypes.POINTER(ctypes.c_float), ctypes.c_size_t]
        lib.minilm_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32),
                                        ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
        lib.minilm_strerror.restype = ctypes.c_char_p
        lib.minilm_version.restype = ctypes.c_char_p
        self.lib = lib

    def strerror(self, code: int) -> str:
        return self.lib.minilm_strerror(code).decode()

    def check(self, status: int) -> None:
        if status:
            raise MinilmError(status, self.strerror(status))

    def load(self, model: Path | str | None, n_threads: int = 0, max_tokens: int = 0) -> Model:
        p = self.lib.minilm_default_params()
        p.n_threads, p.max_tokens = n_threads, max_tokens
        err = ctypes.c_int(-1)
        ctx = self.lib.minilm_init_from_file(None if model is None else str(model).encode(), p, ctypes.byref(err))
        if not ctx:
            raise MinilmError(err.value, f"{model}: {self.strerror(err.value)}")
        return self.model_class(self, ctx)
