"""LocalAI kitten-tts backend: TTS with KittenTTS (ONNX, CPU, 24 kHz output).

kittentts 0.1.3's constructor takes ``KittenTTS(model_path, voices_path)``: the path of an ONNX
file and of a voices ``.npz``, and downloads its own default model from the hub when either is
missing. ``ModelOptions.Model`` here may be:
- a local model directory (a hub snapshot: ``config.json`` naming ``model_file`` and ``voices``,
  or exactly one ``*.onnx`` and a ``voices.npz`` / single ``*.npz``),
- a local ``.onnx`` file (its voices: ``voices.npz`` or the single ``*.npz`` beside it),
- a hub id (``KittenML/...``; empty means ``DEFAULT_MODEL``), downloaded the same way (online).
Both files are always resolved here and passed explicitly, so kittentts never downloads behind
the caller's back. Phonemes come from the folder's own espeak-ng (the espeakng-loader wheel
kittentts requires), not the host's (backends/common/espeak.py).
"""

import glob
import json
import os

from backends.common.audio import validate_tts, write_wav
from backends.common.errors import NotFound
from backends.common.espeak import use_bundled_espeak
from backends.common.model_files import check_file, check_model
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

SAMPLE_RATE = 24000
DEFAULT_MODEL = "KittenML/kitten-tts-nano-0.2"
DEFAULT_VOICE = "expr-voice-2-f"
EXPECTS = "a KittenTTS model: a folder with an .onnx model and a voices .npz (and config.json naming them), or that .onnx file"


def _single(paths, what: str, where: str) -> str:
    if len(paths) == 1:
        return paths[0]
    if not paths:
        raise NotFound(f"{where} has no {what}")
    names = ", ".join(os.path.basename(p) for p in sorted(paths))
    raise NotFound(f"{where} has several {what} ({names}): name one in config.json or pass the .onnx file")


def _voices_beside(folder: str) -> str:
    named = os.path.join(folder, "voices.npz")
    if os.path.isfile(named):
        return named
    return _single(glob.glob(os.path.join(folder, "*.npz")), "voices file (*.npz)", folder)


def model_files(path: str) -> tuple:
    """(ONNX path, voices .npz path) of a local model directory or .onnx file."""
    if os.path.isfile(path):
        if not path.endswith(".onnx"):
            raise NotFound(f"{path} is not an ONNX model (.onnx) or a KittenTTS model directory")
        return path, _voices_beside(os.path.dirname(os.path.abspath(path)))
    if not os.path.isdir(path):
        raise NotFound(f"KittenTTS model not found: {path}")
    config = os.path.join(path, "config.json")
    if os.path.isfile(config):
        with open(config, encoding="utf-8") as fh:
            data = json.load(fh)
        onnx = os.path.join(path, data.get("model_file", ""))
        voices = os.path.join(path, data.get("voices", ""))
        for file, key in ((onnx, "model_file"), (voices, "voices")):
            if not os.path.isfile(file):
                raise NotFound(f"{config} names {key} {os.path.basename(file) or '(nothing)'!r}, which is not in {path}")
        return onnx, voices
    onnx = _single(glob.glob(os.path.join(path, "*.onnx")), "ONNX model (*.onnx)", path)
    return onnx, _voices_beside(path)


def hub_files(repo: str) -> tuple:
    """Download a hub model's config.json, then the ONNX and voices files it names."""
    from huggingface_hub import hf_hub_download

    config = hf_hub_download(repo, "config.json")
    return model_files(os.path.dirname(config))


def is_hub_id(model: str) -> bool:
    return model.startswith("KittenML/") and not os.path.exists(model)


class KittenTTSServicer(BaseServicer):
    allow_empty_model = True
    model_expects = EXPECTS

    def resolve_path(self, request):
        if not request.Model:
            return DEFAULT_MODEL
        if is_hub_id(request.Model):
            return request.Model
        return super().resolve_path(request)

    def load(self, request, path):
        from kittentts import KittenTTS

        if is_hub_id(path):
            onnx, voices = hub_files(path)
        else:
            # Contents first: a damaged file is named before a missing companion.
            check_model(path, EXPECTS, file_formats=("onnx",), directory=True)
            onnx, voices = model_files(path)
        check_file(onnx, ("onnx",), EXPECTS)
        check_file(voices, ("zip",), EXPECTS)
        use_bundled_espeak()  # KittenTTS builds its espeak phonemizer in its constructor
        return KittenTTS(onnx, voices)

    def TTS(self, request, context):
        validate_tts(request)
        model = self.require_model()
        voice = request.voice or DEFAULT_VOICE
        known = list(getattr(getattr(model, "_voices", None), "files", None) or getattr(model, "available_voices", []))
        if known and voice not in known:
            raise NotFound(f"unknown voice {voice!r}; this model has: {', '.join(known)}")
        audio = model.generate(request.text, voice=voice)
        write_wav(request.dst, audio, SAMPLE_RATE)
        return backend_pb2.Result(success=True, message=f"audio written to {request.dst}")


def main(argv=None):
    run(KittenTTSServicer, argv)


if __name__ == "__main__":
    main()
