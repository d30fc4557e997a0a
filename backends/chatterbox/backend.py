"""LocalAI chatterbox backend: TTS (optionally voice-cloned from a reference WAV)."""

import os

from backends.common.audio import validate_tts, write_wav
from backends.common.errors import InvalidArgument, NotFound
from backends.common.model_files import check_model
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

EXPECTS = "a Chatterbox model folder (ve.safetensors, t3_cfg.safetensors, s3gen.safetensors, tokenizer.json, conds.pt)"


class ChatterboxServicer(BaseServicer):
    allow_empty_model = True
    model_expects = EXPECTS

    def resolve_path(self, request):
        if request.Model in ("", "chatterbox", "ResembleAI/chatterbox"):
            return ""  # the official checkpoints, fetched by chatterbox itself
        return super().resolve_path(request)

    def load(self, request, path):
        import torch

        from backends.common.device import select_device
        from chatterbox.tts import ChatterboxTTS

        device = select_device(torch)
        if path:
            check_model(path, EXPECTS, directory=True)
            model = ChatterboxTTS.from_local(path, device)
        else:
            model = ChatterboxTTS.from_pretrained(device=device)
        self.reference = None
        if request.AudioPath:
            ref = request.AudioPath if os.path.isabs(request.AudioPath) else os.path.join(request.ModelPath, request.AudioPath)
            if not os.path.isfile(ref):
                raise NotFound(f"reference voice not found: {ref}")
            self.reference = ref
        return model

    def TTS(self, request, context):
        validate_tts(request)
        model = self.require_model()
        reference = self.reference
        if request.voice:
            if not os.path.isfile(request.voice):
                raise NotFound(f"voice must be a reference WAV path; not found: {request.voice}")
            reference = request.voice
        kwargs = {}
        for key in ("exaggeration", "cfg_weight", "temperature"):
            if key in request.params:
                try:
                    kwargs[key] = float(request.params[key])
                except ValueError:
                    raise InvalidArgument(f"params[{key!r}] must be a number, got {request.params[key]!r}") from None
        wav = model.generate(request.text, audio_prompt_path=reference, **kwargs)
        write_wav(request.dst, wav, model.sr)
        return backend_pb2.Result(success=True, message=f"audio written to {request.dst}")


def main(argv=None):
    run(ChatterboxServicer, argv)


if __name__ == "__main__":
    main()
