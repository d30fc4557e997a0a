"""kokoro's own logic: LocalAI's language mapping and how a TTS request reaches KPipeline.

The kokoro library is faked at its API boundary (``kokoro.KPipeline`` yielding results with an
``audio`` tensor-like); the servicer is the real one."""
import sys
import types
import wave

import grpc
import pytest

from backends.common.errors import InvalidArgument
from backends.common.testing import AbortError, FakeContext, load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


@pytest.mark.parametrize(
    "language, code",
    [
        ("en", "a"),  # was 'e' (Spanish) when the first letter of the language was taken
        ("en-us", "a"), ("EN-GB", "b"), ("american_english", "a"), ("british_english", "b"),
        ("es", "e"), ("spanish", "e"), ("fr-fr", "f"), ("french", "f"), ("hi", "h"), ("it", "i"),
        ("pt-br", "p"), ("portuguese", "p"), ("ja", "j"), ("japanese", "j"), ("zh", "z"),
        ("mandarin_chinese", "z"), ("a", "a"), ("z", "z"), (" j ", "j"),
    ],
)
def test_language_maps_as_localai_does(language, code):
    assert backend.language_code(language) == code


@pytest.mark.parametrize("language", ["klingon", "de", "x", "english-ish"])
def test_unknown_language_is_invalid_argument_listing_the_accepted_ones(language):
    with pytest.raises(InvalidArgument, match="american_english") as e:
        backend.language_code(language)
    assert repr(language) in e.value.message


def test_precedence_request_then_option_then_env_then_voice():
    env = {"KOKORO_LANG_CODE": "j"}
    assert backend.lang_code_for("bf_emma", "es", "f", env) == "e"
    assert backend.lang_code_for("bf_emma", "", "f", env) == "f"
    assert backend.lang_code_for("bf_emma", "", "", env) == "j"
    assert backend.lang_code_for("bf_emma", "", "", {}) == "b"
    assert backend.lang_code_for("/voices/zf_xiaobei.pt", "", "", {}) == "z"
    assert backend.lang_code_for("", "", "", {}) == "a"  # af_heart, LocalAI's default voice
    assert backend.lang_code_for("custom", "", "", {}) == "a"  # 'c' is no Kokoro language


def test_options_parse_like_localai():
    assert backend.parse_options(["lang_code:b", "junk", "speed: 1.2", "a:b:c"]) == {
        "lang_code": "b", "speed": "1.2", "a": "b:c"
    }


class FakeAudio:
    def __init__(self, n):
        self.n = n

    def cpu(self):
        return self

    def numpy(self):
        import numpy as np

        return np.full(self.n, 0.25, dtype=np.float32)


@pytest.fixture
def fake_kokoro(monkeypatch):
    created = []

    class KPipeline:
        def __init__(self, lang_code, model):
            created.append(lang_code)
            self.model = model

        def __call__(self, text, voice):
            self.voice = voice
            yield types.SimpleNamespace(audio=FakeAudio(100))
            yield types.SimpleNamespace(audio=None)
            yield types.SimpleNamespace(audio=FakeAudio(50))

    monkeypatch.setitem(sys.modules, "kokoro", types.SimpleNamespace(KPipeline=KPipeline))
    # misaki, spaCy and espeak-ng are the faked library's: English is installed, espeak-ng set up.
    monkeypatch.setattr(backend, "spacy_model_installed", lambda name: True)
    monkeypatch.setattr(backend, "use_bundled_espeak", lambda: "")
    return created


def servicer(lang_option=""):
    s = backend.KokoroServicer()
    s.model = object()
    s.pipelines = {}
    s.voices_dir = None
    s.lang_option = lang_option
    return s


def test_tts_builds_the_pipeline_of_the_mapped_language_and_writes_24khz(fake_kokoro, tmp_path):
    s = servicer()
    dst = tmp_path / "o.wav"
    s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(dst), language="en"), FakeContext())
    s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(dst), voice="bf_emma"), FakeContext())
    s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(dst), language="en-us"), FakeContext())
    assert fake_kokoro == ["a", "b"]  # one pipeline per language, reused
    with wave.open(str(dst)) as w:
        assert (w.getframerate(), w.getnframes()) == (24000, 150)


def test_load_option_lang_code_applies_when_the_request_has_no_language(fake_kokoro, tmp_path):
    s = servicer(lang_option="spanish")
    s.TTS(backend_pb2.TTSRequest(text="hola", dst=str(tmp_path / "o.wav"), voice="af_heart"), FakeContext())
    assert fake_kokoro == ["e"]


def test_unknown_language_fails_before_any_pipeline(fake_kokoro, tmp_path):
    s = servicer()
    with pytest.raises(AbortError) as e:
        s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(tmp_path / "o.wav"), language="klingon"), FakeContext())
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "klingon" in e.value.details
    assert fake_kokoro == [] and not (tmp_path / "o.wav").exists()


def test_english_without_spacys_model_is_failed_precondition_naming_it(fake_kokoro, monkeypatch, tmp_path):
    monkeypatch.setattr(backend, "spacy_model_installed", lambda name: name != "en_core_web_sm")
    s = servicer()
    for request in (dict(language="en"), dict(voice="bf_emma"), dict()):  # the default voice is af_heart
        with pytest.raises(AbortError) as e:
            s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(tmp_path / "o.wav"), **request), FakeContext())
        assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION and "en_core_web_sm" in e.value.details
    assert fake_kokoro == [] and not (tmp_path / "o.wav").exists()
    s.TTS(backend_pb2.TTSRequest(text="hola", dst=str(tmp_path / "o.wav"), language="es"), FakeContext())
    assert fake_kokoro == ["e"]
