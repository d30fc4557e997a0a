"""coqui's own logic: model names vs paths, language and speaker selection, errors.

Coqui TTS is faked at its API boundary (``TTS.api.TTS``: constructor, ``to``,
``is_multi_lingual``/``is_multi_speaker``, ``tts_to_file``); the servicer is the real one."""
import sys
import types

import grpc
import pytest

from backends.common.testing import AbortError, FakeContext, load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


@pytest.fixture
def fake_tts(monkeypatch):
    made = []

    class TTS:
        is_multi_lingual = False
        is_multi_speaker = False

        def __init__(self, model_name=None, model_path=None, config_path=None):
            self.init = dict(model_name=model_name, model_path=model_path, config_path=config_path)
            made.append(self)

        def to(self, device):
            self.device = device
            return self

        def tts_to_file(self, text, file_path, **kwargs):
            self.call = dict(text=text, **kwargs)
            with open(file_path, "wb") as fh:
                fh.write(b"RIFF")

    api = types.ModuleType("TTS.api")
    api.TTS = TTS
    pkg = types.ModuleType("TTS")
    pkg.api = api
    monkeypatch.setitem(sys.modules, "TTS", pkg)
    monkeypatch.setitem(sys.modules, "TTS.api", api)
    return made


def test_coqui_names_are_four_part_catalogue_ids():
    assert backend.is_coqui_name("tts_models/en/ljspeech/tacotron2-DDC")
    assert backend.is_coqui_name("vocoder_models/en/ljspeech/hifigan_v2")
    assert not backend.is_coqui_name("tts_models/en/ljspeech")
    assert not backend.is_coqui_name("my_models/en/ljspeech/x")


def load(s, **options):
    return s.LoadModel(backend_pb2.ModelOptions(**options), FakeContext())


def test_directory_loads_with_its_config_and_a_name_goes_to_coqui(fake_tts, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    s = backend.CoquiServicer()
    assert load(s, Model=str(tmp_path)).success
    assert fake_tts[-1].init == dict(model_name=None, model_path=str(tmp_path), config_path=str(tmp_path / "config.json"))
    assert fake_tts[-1].device == "cpu"
    assert load(s, Model="tts_models/en/ljspeech/tacotron2-DDC").success
    assert fake_tts[-1].init["model_name"] == "tts_models/en/ljspeech/tacotron2-DDC"


def test_missing_directory_is_not_found_without_calling_coqui(fake_tts, tmp_path):
    with pytest.raises(AbortError) as e:
        load(backend.CoquiServicer(), Model=str(tmp_path / "gone"))
    assert e.value.code == grpc.StatusCode.NOT_FOUND and fake_tts == []


def tts(s, tmp_path, **kw):
    s.TTS(backend_pb2.TTSRequest(text="hello", dst=str(tmp_path / "o.wav"), **kw), FakeContext())
    return s.model.call


def test_language_goes_only_to_multilingual_models_defaulting_to_en(fake_tts, tmp_path):
    s = backend.CoquiServicer()
    load(s, Model=str(tmp_path))
    assert tts(s, tmp_path, language="de") == {"text": "hello"}  # single-language model: no language
    s.model.is_multi_lingual = True
    assert tts(s, tmp_path)["language"] == "en"
    assert tts(s, tmp_path, language="de")["language"] == "de"


def test_speaker_is_a_wav_path_a_name_or_the_load_time_reference(fake_tts, tmp_path):
    ref = tmp_path / "ref.wav"
    ref.write_bytes(b"RIFF")
    s = backend.CoquiServicer()
    load(s, Model=str(tmp_path), AudioPath="ref.wav", ModelPath=str(tmp_path))
    s.model.is_multi_speaker = True
    assert tts(s, tmp_path, voice=str(ref))["speaker_wav"] == str(ref)
    assert tts(s, tmp_path, voice="Ana Florence")["speaker"] == "Ana Florence"
    assert tts(s, tmp_path)["speaker_wav"] == str(ref)  # AudioPath, relative to ModelPath


def test_multispeaker_model_without_any_voice_is_invalid_argument(fake_tts, tmp_path):
    s = backend.CoquiServicer()
    load(s, Model=str(tmp_path))
    s.model.is_multi_speaker = True
    with pytest.raises(AbortError) as e:
        tts(s, tmp_path)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "several speakers" in e.value.details


@pytest.mark.parametrize("fields, code", [(dict(text=""), "INVALID_ARGUMENT"), (dict(dst="/no/such/dir/o.wav"), "NOT_FOUND")])
def test_bad_requests_never_reach_coqui(fake_tts, tmp_path, fields, code):
    s = backend.CoquiServicer()
    load(s, Model=str(tmp_path))
    request = {"text": "hi", "dst": str(tmp_path / "o.wav"), **fields}
    with pytest.raises(AbortError) as e:
        s.TTS(backend_pb2.TTSRequest(**request), FakeContext())
    assert e.value.code == getattr(grpc.StatusCode, code) and not hasattr(s.model, "call")
