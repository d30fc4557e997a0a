"""ctypes binding of include/minilm.h, used by the tests and the benchmark."""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

VARIANTS = ("fallback", "avx2", "avx512")
# Which /proc/cpuinfo flags a variant needs (ggml's ISA options of that variant).
VARIANT_FLAGS = {
    "fallback": set(),
    "avx2": {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"},
    "avx512": {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f"},
}
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


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def supported(variant: str) -> bool:
    return VARIANT_FLAGS[variant] <= cpu_flags()


def library_path(variant: str) -> Path:
    """The packaged library: in a `pants test` sandbox it is at the package's output path
    (runtime_package_dependencies); outside Pants, under $MINILM_DIST (default dist/)."""
    rel = Path("engines/minilm") / variant / "libminilm.so"
    for base in (Path("."), Path(os.environ.get("MINILM_DIST", "dist"))):
        if (base / rel).is_file():
            return (base / rel).resolve()
    raise FileNotFoundError(f"{rel} not found: run `pants package engines/minilm:{variant}` (or set MINILM_DIST)")


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


class Lib:
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

    def load(self, model: Path | str | None, n_threads: int = 0, max_tokens: int = 0) -> "Model":
        p = self.lib.minilm_default_params()
        p.n_threads, p.max_tokens = n_threads, max_tokens
        err = ctypes.c_int(-1)
        ctx = self.lib.minilm_init_from_file(None if model is None else str(model).encode(), p, ctypes.byref(err))
        if not ctx:
            raise MinilmError(err.value, self.strerror(err.value))
        assert err.value == 0
        return Model(self, ctx)


class Model:
    def __init__(self, lib: Lib, ctx: int):
        self._lib, self.ctx = lib, ctx
        self.n_embd = lib.lib.minilm_n_embd(ctx)

    def close(self):
        if self.ctx:
            self._lib.lib.minilm_free(self.ctx)
            self.ctx = None

    def __del__(self):
        self.close()

    def embed_status(self, texts: list[str]) -> tuple[int, np.ndarray]:
        arr = (ctypes.c_char_p * max(1, len(texts)))(*[c_string(t) for t in texts])
        out = np.zeros((max(1, len(texts)), self.n_embd), np.float32)
        st = self._lib.lib.minilm_embed(self.ctx, arr, len(texts), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size)
        return st, out[: len(texts)]

    def embed(self, texts: list[str]) -> np.ndarray:
        st, out = self.embed_status(texts)
        if st:
            raise MinilmError(st, self._lib.strerror(st))
        return out

    def tokenize(self, text: str | bytes) -> list[int]:
        b = text if isinstance(text, bytes) else c_string(text)
        n = ctypes.c_int32(0)
        st = self._lib.lib.minilm_tokenize(self.ctx, b, None, 0, ctypes.byref(n))
        if st:
            raise MinilmError(st, self._lib.strerror(st))
        ids = (ctypes.c_int32 * n.value)()
        st = self._lib.lib.minilm_tokenize(self.ctx, b, ids, n.value, ctypes.byref(n))
        if st:
            raise MinilmError(st, self._lib.strerror(st))
        return list(ids)
