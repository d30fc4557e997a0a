"""LocalAI kokoro backend: TTS with Kokoro-82M (``kokoro`` package, 24 kHz output).

Model: a directory with ``config.json`` and a ``*.pth`` checkpoint (and ``voices/*.pt``),
or empty / ``hexgrad/Kokoro-82M`` for kokoro's own download. ``voice`` names a voice
(e.g. ``af_heart``) or a ``.pt`` voice file.

Language (Kokoro's one-letter lang_code), as LocalAI does it: ``TTSRequest.language`` mapped by
the table of LocalAI's Kokoro-on-MLX backend (``american_english`` -> ``a``, ``spanish`` -> ``e``,
..., the codes themselves) plus Kokoro's own ISO aliases (``en-us``, ``es``, ``pt-br``, ...; ``en``
is American English, LocalAI's default); without it, LocalAI's kokoro backend's ``lang_code:<c>``
LoadModel option or ``KOKORO_LANG_CODE``; without those, the voice's first letter (``bf_emma``
-> ``b``), as LocalAI's MLX backend does; else ``a``. An unknown language is INVALID_ARGUMENT.

G2P: misaki. English (``a``, ``b``) needs spaCy's ``en_core_web_sm``, which no locked wheel
carries (spaCy publishes it on GitHub, not PyPI) and which misaki would fetch by running pip from
the server (``misaki.en.G2P.__init__`` -> ``spacy.cli.download``): without it English is
FAILED_PRECONDITION naming it. The other espeak-ng languages (``e f h i p``) phonemize with the
folder's own espeak-ng at any install path (backends/common/espeak.py).
"""

import glob
import importlib.util
import os

from backends.common.audio import validate_tts, write_wav
from backends.common.errors import FailedPrecondition, InvalidArgument
from backends.common.espeak import use_bundled_espeak
from backends.common.model_files import check_model
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

SAMPLE_RATE = 24000
EXPECTS = "a Kokoro model: a folder with config.json and one .pth checkpoint (torch.save), or that .pth with config.json beside it"
DEFAULT_VOICE = "af_heart"
ENGLISH_SPACY_MODEL = "en_core_web_sm"  # what misaki.en.G2P(trf=False) loads
ESPEAK_LANGUAGES = "efhip"  # kokoro.pipeline.LANG_CODES phonemized by misaki.espeak.EspeakG2P alone


KOKORO_CODES = frozenset("abefhijpz")
# LocalAI backend/python/mlx-audio/backend.py _map_language_code (Kokoro's language names).
LOCALAI_LANGUAGE_NAMES = {
    "american_english": "a",
    "british_english": "b",
    "spanish": "e",
    "french": "f",
    "hindi": "h",
    "italian": "i",
    "portuguese": "p",
    "japanese": "j",
    "mandarin_chinese": "z",
}
# kokoro.pipeline.ALIASES (ISO codes KPipeline accepts), and bare "en" as American English.
ISO_ALIASES = {
    "en-us": "a", "en-gb": "b", "es": "e", "fr-fr": "f", "hi": "h", "it": "i", "pt-br": "p", "ja": "j", "zh": "z",
    "en": "a", "fr": "f", "pt": "p",
}


def parse_options(options) -> dict:
    """LocalAI's ``ModelOptions.Options``: "key:value" strings (others ignored)."""
    parsed = {}
    for opt in options:
        if ":" in opt:
            key, value = opt.split(":", 1)
            parsed[key.strip()] = value.strip()
    return parsed


def language_code(language: str) -> str:
    key = language.strip().lower()
    if key in KOKORO_CODES:
        return key
    if key in LOCALAI_LANGUAGE_NAMES:
        return LOCALAI_LANGUAGE_NAMES[key]
    if key.replace("_", "-") in ISO_ALIASES:
        return ISO_ALIASES[key.replace("_", "-")]
    accepted = sorted(KOKORO_CODES) + sorted(LOCALAI_LANGUAGE_NAMES) + sorted(ISO_ALIASES)
    raise InvalidArgument(f"language {language!r} is not one Kokoro speaks; use one of: {', '.join(accepted)}")


def lang_code_for(voice: str, language: str = "", option: str = "", environ=None) -> str:
    """Kokoro's lang_code for a request (see the module docstring for the order)."""
    environ = os.environ if environ is None else environ
    for given in (language, option, environ.get("KOKORO_LANG_CODE", "")):
        if given and given.strip():
            return language_code(given)
    name = os.path.basename(voice) if voice else DEFAULT_VOICE
    first = name[:1].lower()
    return first if first in KOKORO_CODES else "a"


def spacy_model_installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def local_model_files(path: str):
    """(config.json, .pth) of a local Kokoro model, both local: KModel fetches whichever it is not
    given from the Hub, so a local model must never leave either out."""
    check_model(path, EXPECTS, file_formats=("zip", "pickle"), directory=True, required=["config.json"])
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    config = os.path.join(folder, "config.json")
    if os.path.isdir(path):
        found = sorted(glob.glob(os.path.join(path, "*.pth")))
        if len(found) != 1:
            raise InvalidArgument(f"{path} holds {len(found)} .pth files ({', '.join(map(os.path.basename, found))}): expected {EXPECTS}")
        return config, found[0]
    if not os.path.isfile(config):
        raise InvalidArgument(f"{path} has no config.json beside it ({config}): expected {EXPECTS}")
    check_model(config, EXPECTS, file_formats=("json",))
    return config, path


class KokoroServicer(BaseServicer):
    allow_empty_model = True
    model_expects = EXPECTS

    def resolve_path(self, request):
        if request.Model in ("", "kokoro", "hexgrad/Kokoro-82M"):
            return ""
        return super().resolve_path(request)

    def load(self, request, path):
        local = local_model_files(path) if path and os.path.exists(path) else None
        import torch

        from backends.common.device import select_device
        from kokoro import KModel

        device = select_device(torch)
        if local:
            model = KModel(repo_id="hexgrad/Kokoro-82M", config=local[0], model=local[1])
        elif path:  # a hub id (online only: resolve_model_path)
            model = KModel(repo_id=path)
        else:
            model = KModel()
        self.voices_dir = os.path.join(path, "voices") if local and os.path.isdir(path) else None
        self.pipelines = {}
        self.lang_option = parse_options(request.Options).get("lang_code", "")
        if self.lang_option:
            language_code(self.lang_option)  # an unknown lang_code fails LoadModel, not every TTS
        return model.to(device).eval()

    def _pipeline(self, lang):
        from kokoro import KPipeline

        if lang not in self.pipelines:
            if lang in "ab" and not spacy_model_installed(ENGLISH_SPACY_MODEL):
                raise FailedPrecondition(
                    f"English (lang_code {lang!r}) needs spaCy's {ENGLISH_SPACY_MODEL} for misaki's G2P, which this "
                    f"backend does not carry (spaCy ships it from GitHub, not PyPI); a language espeak-ng phonemizes "
                    f"works: lang_code one of {', '.join(ESPEAK_LANGUAGES)} (e.g. language 'es' or a voice 'ef_...')"
                )
            use_bundled_espeak()  # after misaki's import, which sets its own data path
            self.pipelines[lang] = KPipeline(lang_code=lang, model=self.model)
        return self.pipelines[lang]

    def TTS(self, request, context):
        validate_tts(request)
        self.require_model()
        import numpy as np

        voice = request.voice or DEFAULT_VOICE
        if self.voices_dir and not voice.endswith(".pt"):
            local = os.path.join(self.voices_dir, voice + ".pt")
            if os.path.isfile(local):
                voice = local
        language = request.language if request.HasField("language") else ""
        pipeline = self._pipeline(lang_code_for(request.voice or DEFAULT_VOICE, language, self.lang_option))
        chunks = [r.audio.cpu().numpy() for r in pipeline(request.text, voice=voice) if r.audio is not None]
        write_wav(request.dst, np.concatenate(chunks) if chunks else [], SAMPLE_RATE)
        return backend_pb2.Result(success=True, message=f"audio written to {request.dst}")


def main(argv=None):
    run(KokoroServicer, argv)


if __name__ == "__main__":
    main()
