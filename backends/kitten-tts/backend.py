"""LocalAI kitten-tts backend: TTS with KittenTTS (ONNX, CPU, 24 kHz output)."""

from backends.common.audio import validate_tts, write_wav
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

SAMPLE_RATE = 24000
DEFAULT_MODEL = "KittenML/kitten-tts-nano-0.2"
DEFAULT_VOICE = "expr-voice-2-f"


class KittenTTSServicer(BaseServicer):
    allow_empty_model = True

    def resolve_path(self, request):
        if not request.Model:
            return DEFAULT_MODEL
        if request.Model.startswith("KittenML/"):
            return request.Model
        return super().resolve_path(request)

    def load(self, request, path):
        from kittentts import KittenTTS  # noqa: PLC0415

        return KittenTTS(path)

    def TTS(self, request, context):
        validate_tts(request)
        model = self.require_model()
        audio = model.generate(request.text, voice=request.voice or DEFAULT_VOICE)
        write_wav(request.dst, audio, SAMPLE_RATE)
        return backend_pb2.Result(success=True, message=f"audio written to {request.dst}")


def main(argv=None):
    run(KittenTTSServicer, argv)


if __name__ == "__main__":
    main()
