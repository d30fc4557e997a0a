"""LocalAI embedding backend on the native all-MiniLM-L6-v2 engine (engines/minilm, C++ on ggml).

The PEX carries one libminilm.so per CPU level (fallback, avx2, avx512) as package data; the
best one this CPU supports is loaded with ctypes through the engine's flat C ABI
(include/minilm.h). LoadModel takes a GGUF written by engines/minilm/convert.py. No torch.
"""
from __future__ import annotations

import contextlib

from backends.common.engine import EngineServicer, PackagedLibrary
from backends.common.errors import InvalidArgument, NotFound, require
from backends.common.model_files import check_file
from backends.common.paths import model_file
from backends.common.server import run
from backends.proto import backend_pb2
from engines.minilm.binding import CODE, Library, MinilmError, Model

# minilm_status codes (include/minilm.h) -> the error LocalAI gets.
_ERRORS = {CODE[c]: e for c, e in (("MINILM_ERR_FILE_NOT_FOUND", NotFound), ("MINILM_ERR_BAD_FORMAT", InvalidArgument),
                                   ("MINILM_ERR_WRONG_ARCH", InvalidArgument), ("MINILM_ERR_EMPTY_BATCH", InvalidArgument),
                                   ("MINILM_ERR_INVALID_ARGUMENT", InvalidArgument))}


@contextlib.contextmanager
def engine_errors():
    try:
        yield
    except MinilmError as e:
        raise _ERRORS.get(e.code, RuntimeError)(str(e)) from None


class Engine(PackagedLibrary, Library):
    """The best libminilm.so of this PEX for this CPU, extracted to a real file for ctypes."""

    engine_dir, library, override_env = "engines/minilm", "libminilm.so", "LOCALAI_MINILM_CPU"

    def __init__(self):
        super().__init__(__package__)


class MinilmServicer(EngineServicer):
    def new_engine(self):
        return Engine()

    def load(self, request, path):
        path = model_file(path, (".gguf",), "GGUF model")
        # The engine is one per process: a file it would fail on is refused before it sees it.
        check_file(path, ("gguf",), "all-MiniLM-L6-v2 as a GGUF file (engines/minilm/convert.py)")
        with engine_errors():
            return self.engine.load(path, n_threads=max(request.Threads, 0))

    def Embedding(self, request, context):
        text = request.Embeddings or request.Prompt
        require(bool(text), "Embeddings/Prompt text is empty")
        model: Model = self.require_model()
        with engine_errors():
            vec = model.embed([text])[0]
            n = model.count_tokens(text)
        return backend_pb2.EmbeddingResult(
            embeddings=vec, dim=len(vec), tokens=n, prompt_tokens=n, layout=backend_pb2.EMBEDDING_LAYOUT_FINAL
        )


def main(argv=None):
    run(MinilmServicer, argv)


if __name__ == "__main__":
    main()
