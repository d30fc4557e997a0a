"""The native engine of a ggml backend (minilm-ggml, whisper, stablediffusion-ggml): loaded once
per process for this CPU, held by the servicer, and the model closed on unload.

- ``PackagedLibrary`` goes before a binding's ``Library`` class: it picks the best
  ``<engine_dir>/<level>/<library>`` the backend's PEX carries (``cpu_levels``), extracts it to a
  real file for ctypes (kept while the engine lives) and hands its path to the binding.
- ``EngineServicer`` holds that engine: ``self.engine`` loads it on first use (the first
  LoadModel, not at start-up, so a broken library is an RPC's error, not a dead server), and
  ``unload()`` closes the loaded model (anything with ``close()``) before Free or the next load.
"""
from __future__ import annotations

import contextlib
import threading

from .cpu_levels import packaged_library
from .server import BaseServicer


class PackagedLibrary:
    """Mixin: ``class Engine(PackagedLibrary, binding.Library)`` with the three names below."""

    engine_dir: str  # the folder inside the backend's package, e.g. "engines/whisper-cpp"
    library: str  # the file in each level's folder, e.g. "libwhisper.so"
    override_env: str  # forces a level, e.g. "LOCALAI_WHISPER_CPU"

    def __init__(self, package: str, **binding_kwargs):
        self.files = contextlib.ExitStack()
        self.level, path = packaged_library(package, self.engine_dir, self.library, self.override_env, self.files)
        super().__init__(path, **binding_kwargs)


class EngineServicer(BaseServicer):
    """A servicer over one engine: subclasses define ``new_engine()``."""

    def __init__(self, workers: int = 1):
        super().__init__(workers=workers)
        self._engine = None
        self._engine_lock = threading.Lock()

    def new_engine(self):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} does not say which engine it loads")

    @property
    def engine(self):
        with self._engine_lock:
            if self._engine is None:
                self._engine = self.new_engine()
            return self._engine

    def unload(self) -> None:
        model = self.model
        if model is not None:
            model.close()
        super().unload()
