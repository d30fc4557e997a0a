"""LocalAI bark backend: text-to-speech with transformers' own Bark (BarkModel + BarkProcessor).

transformers ships Bark and its Encodec codec, so this backend needs neither the `bark` nor the
`encodec` package, hence no torchaudio (which has no CPU build reachable from PyPI).

LocalAI's bark semantics:
- ``ModelOptions.Model``: a local directory holding a BarkModel and its processor
  (``save_pretrained`` layout; e.g. a snapshot of ``suno/bark`` or ``suno/bark-small``), or a
  hub id (downloaded by transformers, so online only). Empty or "bark" means ``suno/bark``.
- ``TTSRequest.voice``: the voice preset (bark's ``history_prompt``): a preset name the model
  ships in ``speaker_embeddings_path.json`` (e.g. ``v2/en_speaker_6``) or the path of a
  ``.npz`` voice file (absolute, or relative to the model directory). Empty: no preset.
- ``TTSRequest.dst``: where the WAV is written: mono 16-bit PCM at the model's sample rate
  (24 kHz for every Bark checkpoint).
"""

import os

from backends.common.audio import validate_tts, write_wav
from backends.common.errors import BackendError, InvalidArgument, NotFound
from backends.common.model_files import check_model
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

DEFAULT_MODEL = "suno/bark"
HUB_ALIASES = {"": DEFAULT_MODEL, "bark": DEFAULT_MODEL, "bark-small": "suno/bark-small"}
SUB_CONFIGS = ("semantic_config", "coarse_acoustics_config", "fine_acoustics_config")


def _plain_sub_configs(generation_config) -> None:
    """BarkModel.generate() rebuilds its sub-configs with ``Config(**sub_config)``: they must be
    plain dicts, which a generation_config.json loaded as a generic GenerationConfig (or one
    saved with config objects) does not guarantee."""
    for name in SUB_CONFIGS:
        sub = getattr(generation_config, name, None)
        if sub is not None and not isinstance(sub, dict):
            setattr(generation_config, name, sub.to_dict())


def sample_rate_of(model) -> int:
    rate = getattr(model.generation_config, "sample_rate", None)
    if not rate:
        rate = getattr(getattr(model, "codec_model", None), "config", None)
        rate = getattr(rate, "sampling_rate", None)
    return int(rate or 24_000)


def resolve_voice(voice: str, presets, model_dir: str):
    """The ``voice_preset`` argument for BarkProcessor: a known preset name, an existing .npz
    file (absolute or relative to the model directory), or None for no preset."""
    if not voice:
        return None
    if voice in presets:
        return voice
    candidates = [voice, voice + ".npz"]
    if model_dir and not os.path.isabs(voice):
        candidates += [os.path.join(model_dir, c) for c in (voice, voice + ".npz")]
    for path in candidates:
        if path.endswith(".npz") and os.path.isfile(path):
            return path
    known = ", ".join(sorted(presets)[:12]) or "none (the model has no speaker_embeddings_path.json)"
    raise NotFound(f"unknown voice {voice!r}: not a preset of this model ({known}) and no such .npz file")


class PermissionDenied(BackendError):
    code = "PERMISSION_DENIED"


def check_writable(dst: str) -> None:
    """Fail before the (slow) generation when the WAV cannot be written at ``dst``. Opening the
    file is the only test that holds for root, read-only mounts and pseudo file systems alike."""
    if os.path.isdir(dst):
        raise InvalidArgument(f"dst is a directory, not a file path: {dst}")
    existed = os.path.exists(dst)
    try:
        with open(dst, "ab"):
            pass
    except PermissionError as exc:
        raise PermissionDenied(f"dst is not writable: {dst}: {exc.strerror}; choose a writable path") from exc
    except OSError as exc:
        raise InvalidArgument(f"dst cannot be written: {dst}: {exc.strerror}") from exc
    if not existed:
        os.unlink(dst)


EXPECTS = "a Bark model folder (save_pretrained of BarkModel and BarkProcessor: config.json, model.safetensors, tokenizer files)"


class BarkServicer(BaseServicer):
    allow_empty_model = True
    model_expects = EXPECTS

    def resolve_path(self, request):
        if request.Model in HUB_ALIASES:
            return HUB_ALIASES[request.Model]
        return super().resolve_path(request)

    def load(self, request, path):
        if os.path.exists(path):  # else a hub id (online only: resolve_model_path)
            check_model(path, EXPECTS, directory=True, required=["config.json"])
        import torch
        from transformers import BarkModel, BarkProcessor

        from backends.common.device import select_device_and_dtype

        device, dtype = select_device_and_dtype(torch, request.DType or None)
        self.model_dir = path if os.path.isdir(path) else ""
        processor = BarkProcessor.from_pretrained(path)
        model = BarkModel.from_pretrained(path, dtype=dtype).to(device)
        model.eval()
        _plain_sub_configs(model.generation_config)
        self.processor = processor
        self.device = device
        self.sample_rate = sample_rate_of(model)
        if request.Seed:
            torch.manual_seed(request.Seed)
        return model

    def unload(self):
        self.processor = None
        super().unload()

    def TTS(self, request, context):
        validate_tts(request)
        model = self.require_model()
        dst = os.path.abspath(request.dst)
        check_writable(dst)
        presets = self.processor.available_voice_presets if self.processor.speaker_embeddings else []
        voice = resolve_voice(request.voice, presets, self.model_dir)
        import torch

        try:
            inputs = self.processor(request.text, voice_preset=voice)
        except (ValueError, TypeError, OSError) as exc:
            raise InvalidArgument(f"voice {request.voice!r} is not a valid Bark voice preset: {exc}") from exc
        inputs = {k: (v.to(self.device) if hasattr(v, "to") else v) for k, v in inputs.items()}
        with torch.inference_mode():
            audio = model.generate(**inputs)
        write_wav(dst, audio[0], self.sample_rate)
        return backend_pb2.Result(success=True, message=f"audio written to {request.dst}")


def main(argv=None):
    run(BarkServicer, argv)


if __name__ == "__main__":
    main()
