"""chatterbox's own logic: local vs official checkpoints, reference voices, generation
parameters, output. ``chatterbox.tts.ChatterboxTTS`` is faked at its API boundary
(``from_local``/``from_pretrained``, ``generate``, ``sr``); the servicer is real."""
import sys
import types
import wave

import grpc
import pytest

from backends.common.testing import AbortError, FakeContext, load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


@pytest.fixture
def fake_chatterbox(monkeypatch):
    calls = []

    class ChatterboxTTS:
        sr = 24000

        @classmethod
        def from_local(cls, path, device):
            calls.append(("local", path, device))
            return cls()

        @classmethod
        def from_pretrained(cls, device):
            calls.append(("pretrained", device))
            return cls()

        def generate(self, text, audio_prompt_path=None, **kwargs):
            import numpy as np

            self.call = dict(text=text, audio_prompt_path=audio_prompt_path, **kwargs)
            return np.full((1, 480), 0.2, dtype=np.float32)

    tts = types.ModuleType("chatterbox.tts")
    tts.ChatterboxTTS = ChatterboxTTS
    pkg = types.ModuleType("chatterbox")
    pkg.tts = tts
    monkeypatch.setitem(sys.modules, "chatterbox", pkg)
    monkeypatch.setitem(sys.modules, "chatterbox.tts", tts)
    return calls


def load(s, **options):
    return s.LoadModel(backend_pb2.ModelOptions(**options), FakeContext())


def test_empty_or_official_name_uses_pretrained_a_directory_from_local(fake_chatterbox, tmp_path):
    for name in ("", "chatterbox", "ResembleAI/chatterbox"):
        assert load(backend.ChatterboxServicer(), Model=name).success
    assert load(backend.ChatterboxServicer(), Model=str(tmp_path)).success
    assert fake_chatterbox == [("pretrained", "cpu")] * 3 + [("local", str(tmp_path), "cpu")]


def test_missing_reference_voice_fails_load_with_not_found(fake_chatterbox, tmp_path):
    with pytest.raises(AbortError) as e:
        load(backend.ChatterboxServicer(), Model=str(tmp_path), AudioPath="me.wav", ModelPath=str(tmp_path))
    assert e.value.code == grpc.StatusCode.NOT_FOUND and str(tmp_path / "me.wav") in e.value.details


def test_tts_uses_request_voice_over_load_reference_and_writes_at_model_rate(fake_chatterbox, tmp_path):
    (tmp_path / "me.wav").write_bytes(b"RIFF")
    (tmp_path / "you.wav").write_bytes(b"RIFF")
    s = backend.ChatterboxServicer()
    load(s, Model=str(tmp_path), AudioPath="me.wav", ModelPath=str(tmp_path))
    dst = tmp_path / "o.wav"
    s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(dst)), FakeContext())
    assert s.model.call["audio_prompt_path"] == str(tmp_path / "me.wav")
    s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(dst), voice=str(tmp_path / "you.wav")), FakeContext())
    assert s.model.call["audio_prompt_path"] == str(tmp_path / "you.wav")
    with wave.open(str(dst)) as w:
        assert (w.getframerate(), w.getnframes()) == (24000, 480)


def test_generation_params_are_floats_and_unknown_ones_ignored(fake_chatterbox, tmp_path):
    s = backend.ChatterboxServicer()
    load(s)
    params = {"exaggeration": "0.7", "cfg_weight": "0.3", "temperature": "0.9", "other": "x"}
    s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(tmp_path / "o.wav"), params=params), FakeContext())
    assert s.model.call == dict(text="hi", audio_prompt_path=None, exaggeration=0.7, cfg_weight=0.3, temperature=0.9)


def test_non_numeric_param_is_invalid_argument(fake_chatterbox, tmp_path):
    s = backend.ChatterboxServicer()
    load(s)
    with pytest.raises(AbortError) as e:
        s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(tmp_path / "o.wav"), params={"temperature": "hot"}), FakeContext())
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "temperature" in e.value.details


def test_voice_that_is_not_a_file_is_not_found(fake_chatterbox, tmp_path):
    s = backend.ChatterboxServicer()
    load(s)
    with pytest.raises(AbortError) as e:
        s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(tmp_path / "o.wav"), voice="alice"), FakeContext())
    assert e.value.code == grpc.StatusCode.NOT_FOUND and "alice" in e.value.details
