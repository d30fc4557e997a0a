"""LocalAI coqui backend: TTS with Coqui TTS (the maintained ``coqui-tts`` fork).

Model: a local model directory holding config.json (+ checkpoint), or a Coqui model name
such as ``tts_models/en/ljspeech/tacotron2-DDC`` (downloaded by Coqui when reachable).
"""

import os

from backends.common.audio import validate_tts
from backends.common.errors import require
from backends.common.model_files import check_model
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2


def is_coqui_name(model: str) -> bool:
    parts = model.split("/")
    return len(parts) == 4 and parts[0] in ("tts_models", "vocoder_models", "voice_conversion_models")


EXPECTS = "a Coqui TTS model folder (config.json and its checkpoint), or a checkpoint file with config.json beside it"


class CoquiServicer(BaseServicer):
    model_expects = EXPECTS

    def resolve_path(self, request):
        if is_coqui_name(request.Model):
            return request.Model
        return super().resolve_path(request)

    def load(self, request, path):
        import torch
        from TTS.api import TTS

        from backends.common.device import select_device

        device = select_device(torch)
        if os.path.exists(path):  # a local model never goes to Coqui's model download
            check_model(path, EXPECTS, file_formats=("zip", "pickle"), directory=True)
            config = os.path.join(path if os.path.isdir(path) else os.path.dirname(path), "config.json")
            if os.path.isfile(config):
                check_model(config, EXPECTS, file_formats=("json",))
            tts = TTS(model_path=path, config_path=config if os.path.isfile(config) else None)
        else:
            tts = TTS(model_name=path)
        self.default_language = "en"
        if request.AudioPath:
            self.speaker_wav = request.AudioPath if os.path.isabs(request.AudioPath) else os.path.join(request.ModelPath, request.AudioPath)
        else:
            self.speaker_wav = None
        return tts.to(device)

    def TTS(self, request, context):
        validate_tts(request)
        tts = self.require_model()
        kwargs = {}
        if getattr(tts, "is_multi_lingual", False):
            kwargs["language"] = request.language if request.HasField("language") and request.language else self.default_language
        if getattr(tts, "is_multi_speaker", False):
            if request.voice and os.path.isfile(request.voice):
                kwargs["speaker_wav"] = request.voice
            elif request.voice:
                kwargs["speaker"] = request.voice
            elif self.speaker_wav:
                kwargs["speaker_wav"] = self.speaker_wav
            else:
                require(False, "this model has several speakers: set voice (a speaker name or a WAV path)")
        tts.tts_to_file(text=request.text, file_path=request.dst, **kwargs)
        return backend_pb2.Result(success=True, message=f"audio written to {request.dst}")


def main(argv=None):
    run(CoquiServicer, argv)


if __name__ == "__main__":
    main()
