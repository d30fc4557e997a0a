"""LocalAI kokoro backend: TTS with Kokoro-82M (``kokoro`` package, 24 kHz output).

Model: a directory with ``config.json`` and a ``*.pth`` checkpoint (and ``voices/*.pt``),
or empty / ``hexgrad/Kokoro-82M`` for kokoro's own download. ``voice`` names a voice
(e.g. ``af_heart``) or a ``.pt`` voice file; the language comes from the voice's first
letter unless ``language`` is given.
"""

import glob
import os

from backends.common.audio import validate_tts, write_wav
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

SAMPLE_RATE = 24000
DEFAULT_VOICE = "af_heart"


def lang_code_for(voice: str, language: str = "") -> str:
    if language:
        return language[0].lower()
    name = os.path.basename(voice) if voice else DEFAULT_VOICE
    return name[0].lower() if name else "a"


class KokoroServicer(BaseServicer):
    allow_empty_model = True

    def resolve_path(self, request):
        if request.Model in ("", "kokoro", "hexgrad/Kokoro-82M"):
            return ""
        return super().resolve_path(request)

    def load(self, request, path):
        import torch  # noqa: PLC0415
        from kokoro import KModel  # noqa: PLC0415

        from backends.common.device import select_device  # noqa: PLC0415

        device = select_device(torch)
        if path:
            config = os.path.join(path, "config.json") if os.path.isdir(path) else None
            weights = path if os.path.isfile(path) else (sorted(glob.glob(os.path.join(path, "*.pth"))) or [None])[0]
            model = KModel(config=config, model=weights)
            self.voices_dir = os.path.join(path, "voices") if os.path.isdir(path) else None
        else:
            model = KModel()
            self.voices_dir = None
        self.pipelines = {}
        return model.to(device).eval()

    def _pipeline(self, lang):
        from kokoro import KPipeline  # noqa: PLC0415

        if lang not in self.pipelines:
            self.pipelines[lang] = KPipeline(lang_code=lang, model=self.model)
        return self.pipelines[lang]

    def TTS(self, request, context):
        validate_tts(request)
        self.require_model()
        import numpy as np  # noqa: PLC0415

        voice = request.voice or DEFAULT_VOICE
        if self.voices_dir and not voice.endswith(".pt"):
            local = os.path.join(self.voices_dir, voice + ".pt")
            if os.path.isfile(local):
                voice = local
        language = request.language if request.HasField("language") else ""
        pipeline = self._pipeline(lang_code_for(request.voice or DEFAULT_VOICE, language))
        chunks = [r.audio.cpu().numpy() for r in pipeline(request.text, voice=voice) if r.audio is not None]
        write_wav(request.dst, np.concatenate(chunks) if chunks else [], SAMPLE_RATE)
        return backend_pb2.Result(success=True, message=f"audio written to {request.dst}")


def main(argv=None):
    run(KokoroServicer, argv)


if __name__ == "__main__":
    main()
