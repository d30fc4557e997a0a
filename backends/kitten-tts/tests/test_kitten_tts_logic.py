"""kitten-tts's own logic: which ONNX and voices files a model directory, file or hub id gives,
and that both reach kittentts 0.1.3's ``KittenTTS(model_path, voices_path)`` explicitly (a
missing one would make kittentts download its own default model instead).

The kittentts library is faked at its API boundary (the KittenTTS class), and with it the
espeak-ng setup (backends/common/espeak.py, run for real by tests/integration:kitten-tts); the
servicer is real."""
import json
import sys
import types
import wave
import zipfile

import grpc
import pytest

from backends.common.errors import NotFound
from backends.common.testing import AbortError, FakeContext, load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


def touch(path):
    """A file whose header passes the backend's check for its kind (model_files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".onnx":
        path.write_bytes(b"\x08\x08\x3a\x03\x0a\x01g")  # ModelProto{ir_version: 8, graph: {name: "g"}}
    elif path.suffix == ".npz":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("voice.npy", b"")
    else:
        path.write_bytes(b"x")
    return path


def test_hub_snapshot_directory_uses_its_config(tmp_path):
    touch(tmp_path / "kitten_tts_nano_v0_2.onnx")
    touch(tmp_path / "voices.npz")
    touch(tmp_path / "other.onnx")
    (tmp_path / "config.json").write_text(json.dumps({"model_file": "kitten_tts_nano_v0_2.onnx", "voices": "voices.npz"}))
    assert backend.model_files(str(tmp_path)) == (str(tmp_path / "kitten_tts_nano_v0_2.onnx"), str(tmp_path / "voices.npz"))


def test_directory_without_config_takes_its_one_onnx_and_npz(tmp_path):
    touch(tmp_path / "m.onnx")
    touch(tmp_path / "speakers.npz")
    assert backend.model_files(str(tmp_path)) == (str(tmp_path / "m.onnx"), str(tmp_path / "speakers.npz"))


def test_onnx_file_finds_its_voices_beside_it(tmp_path):
    onnx = touch(tmp_path / "m.onnx")
    touch(tmp_path / "voices.npz")
    touch(tmp_path / "extra.npz")  # voices.npz wins over other .npz files
    assert backend.model_files(str(onnx)) == (str(onnx), str(tmp_path / "voices.npz"))


@pytest.mark.parametrize(
    "files, config, message",
    [
        ([], None, "has no ONNX model"),
        (["m.onnx"], None, "has no voices file"),
        (["a.onnx", "b.onnx", "voices.npz"], None, "several ONNX model (*.onnx) (a.onnx, b.onnx)"),
        (["m.onnx", "v.npz"], {"model_file": "m.onnx", "voices": "voices.npz"}, "names voices 'voices.npz'"),
        (["v.npz"], {"model_file": "gone.onnx", "voices": "v.npz"}, "names model_file 'gone.onnx'"),
    ],
)
def test_incomplete_model_directories_are_not_found_saying_what_is_missing(tmp_path, files, config, message):
    for name in files:
        touch(tmp_path / name)
    if config:
        (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(NotFound) as e:
        backend.model_files(str(tmp_path))
    assert message in e.value.message and str(tmp_path) in e.value.message


def test_a_file_that_is_not_onnx_is_refused(tmp_path):
    with pytest.raises(NotFound, match="not an ONNX model"):
        backend.model_files(str(touch(tmp_path / "model.pth")))


class FakeVoices:
    files = ["expr-voice-2-f", "expr-voice-5-m"]


@pytest.fixture
def fake_kittentts(monkeypatch):
    calls = []

    class KittenTTS:
        def __init__(self, model_path=None, voices_path=None):
            calls.append((model_path, voices_path))
            self._voices = FakeVoices()

        def generate(self, text, voice="expr-voice-2-m", speed=1.0):
            import numpy as np

            self.voice = voice
            return np.full((1, 240), 0.1, dtype=np.float32)

    monkeypatch.setitem(sys.modules, "kittentts", types.SimpleNamespace(KittenTTS=KittenTTS))
    monkeypatch.setattr(backend, "use_bundled_espeak", lambda: calls.append("espeak") and "")
    return calls


def test_load_of_a_local_directory_passes_both_paths(fake_kittentts, tmp_path):
    touch(tmp_path / "m.onnx")
    touch(tmp_path / "voices.npz")
    s = backend.KittenTTSServicer()
    res = s.LoadModel(backend_pb2.ModelOptions(Model=str(tmp_path)), FakeContext())
    assert res.success
    # the folder's espeak-ng is set up before KittenTTS builds its phonemizer
    assert fake_kittentts == ["espeak", (str(tmp_path / "m.onnx"), str(tmp_path / "voices.npz"))]
    dst = tmp_path / "o.wav"
    s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(dst), voice="expr-voice-5-m"), FakeContext())
    with wave.open(str(dst)) as w:
        assert (w.getframerate(), w.getnframes()) == (24000, 240)
    assert s.model.voice == "expr-voice-5-m"


def test_load_relative_to_model_path_like_localai(fake_kittentts, tmp_path):
    touch(tmp_path / "kitten" / "m.onnx")
    touch(tmp_path / "kitten" / "voices.npz")
    s = backend.KittenTTSServicer()
    assert s.LoadModel(backend_pb2.ModelOptions(Model="kitten", ModelPath=str(tmp_path)), FakeContext()).success
    assert fake_kittentts[1][0] == str(tmp_path / "kitten" / "m.onnx")


def test_incomplete_directory_fails_load_with_not_found_and_no_download(fake_kittentts, tmp_path):
    touch(tmp_path / "m.onnx")
    s = backend.KittenTTSServicer()
    with pytest.raises(AbortError) as e:
        s.LoadModel(backend_pb2.ModelOptions(Model=str(tmp_path)), FakeContext())
    assert e.value.code == grpc.StatusCode.NOT_FOUND and "voices file" in e.value.details
    assert fake_kittentts == []  # kittentts was never asked (it would have fetched its default)


def test_unknown_voice_is_not_found_listing_the_model_voices(fake_kittentts, tmp_path):
    touch(tmp_path / "m.onnx")
    touch(tmp_path / "voices.npz")
    s = backend.KittenTTSServicer()
    s.LoadModel(backend_pb2.ModelOptions(Model=str(tmp_path)), FakeContext())
    with pytest.raises(AbortError) as e:
        s.TTS(backend_pb2.TTSRequest(text="hi", dst=str(tmp_path / "o.wav"), voice="nobody"), FakeContext())
    assert e.value.code == grpc.StatusCode.NOT_FOUND and "expr-voice-5-m" in e.value.details


def test_hub_ids_pass_through_resolution(monkeypatch):
    s = backend.KittenTTSServicer()
    assert s.resolve_path(backend_pb2.ModelOptions()) == backend.DEFAULT_MODEL
    assert s.resolve_path(backend_pb2.ModelOptions(Model="KittenML/kitten-tts-mini-0.1")) == "KittenML/kitten-tts-mini-0.1"
