"""LocalAI bark backend: TTS with suno-ai's bark (weights cached by bark itself).

ModelOptions.Model may be empty or "bark" (bark's own checkpoints, downloaded to its cache on
first load), or a directory used as bark's cache (XDG_CACHE_HOME layout).
"""

import os

from backends.common.audio import validate_tts, write_wav
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2


class BarkServicer(BaseServicer):
    allow_empty_model = True

    def resolve_path(self, request):
        if request.Model in ("", "bark", "suno/bark", "suno/bark-small"):
            return ""
        return super().resolve_path(request)

    def load(self, request, path):
        if path and os.path.isdir(path):
            os.environ["XDG_CACHE_HOME"] = path
        import torch  # noqa: PLC0415

        from backends.common.device import select_device_and_dtype  # noqa: PLC0415

        device, _ = select_device_and_dtype(torch, request.DType or None)
        from bark import SAMPLE_RATE, generate_audio, preload_models  # noqa: PLC0415

        small = request.Model.endswith("bark-small")
        preload_models(
            text_use_gpu=device == "cuda", coarse_use_gpu=device == "cuda", fine_use_gpu=device == "cuda",
            codec_use_gpu=device == "cuda", text_use_small=small, coarse_use_small=small, fine_use_small=small,
        )
        self.sample_rate = SAMPLE_RATE
        self.generate_audio = generate_audio
        return "bark"

    def TTS(self, request, context):
        validate_tts(request)
        self.require_model()
        audio = self.generate_audio(request.text, history_prompt=request.voice or None)
        write_wav(request.dst, audio, self.sample_rate)
        return backend_pb2.Result(success=True, message=f"audio written to {request.dst}")


def main(argv=None):
    run(BarkServicer, argv)


if __name__ == "__main__":
    main()
