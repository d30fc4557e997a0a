"""LocalAI embedding backend on the native all-MiniLM-L6-v2 engine (engines/minilm, C++ on ggml).

The PEX carries one libminilm.so per CPU level (fallback, avx2, avx512) as package data; the
best one this CPU supports is loaded with ctypes through the engine's flat C ABI
(include/minilm.h). LoadModel takes a GGUF written by engines/minilm/convert.py. No torch.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib.resources
import os

from backends.common.errors import InvalidArgument, NotFound, require
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

# Best first; each needs these /proc/cpuinfo flags.
CPU_LEVELS = (("avx512", {"avx512f", "avx512bw", "avx2", "fma"}), ("avx2", {"avx2", "fma", "f16c"}), ("fallback", set()))
# minilm_status codes (include/minilm.h) -> the error LocalAI gets.
_ERRORS = {2: NotFound, 3: InvalidArgument, 4: InvalidArgument, 5: InvalidArgument, 1: InvalidArgument}


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def pick_level(flags: set[str], available: list[str]) -> str:
    override = os.environ.get("LOCALAI_MINILM_CPU")
    if override:
        require(override in available, f"LOCALAI_MINILM_CPU={override}: not one of {available}")
        return override
    return next(level for level, needs in CPU_LEVELS if level in available and needs <= flags)


class _Params(ctypes.Structure):
    _fields_ = [("n_threads", ctypes.c_int32), ("max_tokens", ctypes.c_int32), ("normalize", ctypes.c_int32)]


class Engine:
    """The C ABI of libminilm.so, extracted from the PEX to a real file for ctypes."""

    def __init__(self):
        root = importlib.resources.files(__package__).joinpath("engines/minilm")
        available = [lvl for lvl, _ in CPU_LEVELS if root.joinpath(lvl, "libminilm.so").is_file()]
        require(bool(available), "this PEX holds no libminilm.so (package it with engines=[...])")
        self.level = pick_level(cpu_flags(), available)
        self._files = contextlib.ExitStack()
        path = self._files.enter_context(importlib.resources.as_file(root.joinpath(self.level, "libminilm.so")))
        lib = ctypes.CDLL(str(path))
        lib.minilm_default_params.restype = _Params
        lib.minilm_init_from_file.restype = ctypes.c_void_p
        lib.minilm_init_from_file.argtypes = [ctypes.c_char_p, _Params, ctypes.POINTER(ctypes.c_int)]
        lib.minilm_free.argtypes = [ctypes.c_void_p]
        lib.minilm_n_embd.argtypes = [ctypes.c_void_p]
        lib.minilm_n_embd.restype = ctypes.c_int32
        lib.minilm_embed.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int32,
                                     ctypes.POINTER(ctypes.c_float), ctypes.c_size_t]
        lib.minilm_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32),
                                        ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
        lib.minilm_strerror.restype = ctypes.c_char_p
        self.lib = lib

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise _ERRORS.get(status, RuntimeError)(f"{what}: {self.lib.minilm_strerror(status).decode()}")


class MinilmModel:
    def __init__(self, engine: Engine, path: str, threads: int):
        self.engine = engine
        params = engine.lib.minilm_default_params()
        if threads > 0:
            params.n_threads = threads
        err = ctypes.c_int(0)
        self.ctx = engine.lib.minilm_init_from_file(path.encode(), params, ctypes.byref(err))
        if not self.ctx:
            engine.check(err.value or 9, f"cannot load {path}")
        self.n_embd = engine.lib.minilm_n_embd(self.ctx)

    def embed(self, text: str) -> list[float]:
        out = (ctypes.c_float * self.n_embd)()
        texts = (ctypes.c_char_p * 1)(text.encode())
        self.engine.check(self.engine.lib.minilm_embed(self.ctx, texts, 1, out, self.n_embd), "embed")
        return list(out)

    def count_tokens(self, text: str) -> int:
        n = ctypes.c_int32(0)
        self.engine.check(self.engine.lib.minilm_tokenize(self.ctx, text.encode(), None, 0, ctypes.byref(n)), "tokenize")
        return n.value

    def close(self) -> None:
        if self.ctx:
            self.engine.lib.minilm_free(self.ctx)
            self.ctx = None


class MinilmServicer(BaseServicer):
    def load(self, request, path):
        if os.path.isdir(path):
            ggufs = sorted(p for p in os.listdir(path) if p.endswith(".gguf"))
            require(len(ggufs) == 1, f"{path}: expected one .gguf file, found {ggufs}")
            path = os.path.join(path, ggufs[0])
        if not hasattr(self, "engine"):
            self.engine = Engine()
        return MinilmModel(self.engine, path, request.Threads)

    def unload(self) -> None:
        model = getattr(self, "model", None)
        if model is not None:
            model.close()
        super().unload()

    def Embedding(self, request, context):
        text = request.Embeddings or request.Prompt
        require(bool(text), "Embeddings/Prompt text is empty")
        model = self.require_model()
        vec = model.embed(text)
        n = model.count_tokens(text)
        return backend_pb2.EmbeddingResult(
            embeddings=vec, dim=len(vec), tokens=n, prompt_tokens=n, layout=backend_pb2.EMBEDDING_LAYOUT_FINAL
        )


def main(argv=None):
    run(MinilmServicer, argv)


if __name__ == "__main__":
    main()
