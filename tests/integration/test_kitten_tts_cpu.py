"""backends/kitten-tts:cpu, packaged by Pants, started as LocalAI starts it, called over gRPC.

The offline cases (tts_offline_cases), and synthesis with a model made in the test
(tiny_models.tiny_kitten_tts): an ONNX graph with the inputs and output kittentts 0.1.3 feeds and
reads, random weights, the hub snapshot's files. The text goes through kittentts' own path (the
folder's espeak-ng phonemizes it, kittentts maps the phonemes to ids) into onnxruntime; the
graph gives exactly KITTEN_SAMPLES_PER_ID samples per id, shaped by the voice. The synthesis
server runs from a folder path past espeak-ng's 160-byte data path limit (tts_synthesis).
"""
import pytest

from tests.integration.backend_process import BackendProcess
from tests.integration.rpc_checks import assert_healthy
from tests.integration.tiny_models import KITTEN_SAMPLES_PER_ID, tiny_kitten_tts
from tests.integration.tts_offline_cases import *  # noqa: F401,F403 (the shared test cases)
from tests.integration.tts_synthesis import assert_folders_own_espeak, assert_wrote_nothing, deep_folder, load, outside_dirs, speak

RATE = 24_000
SHORT = "Hi."
LONG = "Hello world, this is a longer sentence for the tiny model to speak."


@pytest.fixture(scope="module")
def backend_name() -> str:
    return "kitten-tts"


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    return deep_folder("kitten-tts", tmp_path_factory.mktemp("kitten-tts-folder"))


@pytest.fixture(scope="module")
def loaded(deep, tmp_path_factory):
    model = tiny_kitten_tts(tmp_path_factory.mktemp("tiny-kitten-tts"))
    outside = outside_dirs(tmp_path_factory.mktemp("outside"))
    with BackendProcess("kitten-tts", run_sh=deep / "run.sh", env=outside) as proc:
        proc.outside = outside
        load(proc, model)
        yield proc


def test_tts_writes_a_24khz_wav_whose_length_grows_with_the_text(loaded, tmp_path) -> None:
    short = speak(loaded, tmp_path / "short.wav", SHORT, RATE)
    long = speak(loaded, tmp_path / "long.wav", LONG, RATE)
    # every phoneme id (and the two pads) is KITTEN_SAMPLES_PER_ID samples of the graph's output
    assert short.frames % KITTEN_SAMPLES_PER_ID == 0 and long.frames % KITTEN_SAMPLES_PER_ID == 0
    assert short.frames >= 3 * KITTEN_SAMPLES_PER_ID  # pad, at least one phoneme, pad
    assert long.frames > 3 * short.frames, (short.frames, long.frames)
    assert_healthy(loaded.stub)


def test_the_voice_reaches_the_model_and_the_same_request_gives_the_same_audio(loaded, tmp_path) -> None:
    a = speak(loaded, tmp_path / "a.wav", SHORT, RATE, voice="expr-voice-2-f")
    again = speak(loaded, tmp_path / "again.wav", SHORT, RATE, voice="expr-voice-2-f")
    other = speak(loaded, tmp_path / "other.wav", SHORT, RATE, voice="expr-voice-5-m")
    assert a.data == again.data
    assert other.frames == a.frames and other.data != a.data


def test_phonemes_come_from_the_folders_own_espeak_at_a_deep_path_and_nothing_is_written(loaded, deep, tmp_path) -> None:
    speak(loaded, tmp_path / "o.wav", SHORT, RATE)
    assert_folders_own_espeak(loaded.proc.pid, deep)
    assert_wrote_nothing(loaded.outside)
