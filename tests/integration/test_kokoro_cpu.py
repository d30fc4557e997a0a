"""backends/kokoro:cpu, packaged by Pants, started as LocalAI starts it, called over gRPC.

The offline cases (tts_offline_cases), and synthesis with a random-weight Kokoro made in the test
by the folder's own kokoro (tiny_models.tiny_kokoro, tiny_kokoro_build.py): config.json, the .pth
and a voice pack in voices/, loaded by KModel and spoken through KPipeline. English needs spaCy's
en_core_web_sm, which the folder does not carry (and misaki would fetch with pip), so the text is
Spanish: the voice ef_dora gives lang_code "e", which misaki phonemizes with espeak-ng alone (the
folder's own, checked). English is checked to answer FAILED_PRECONDITION naming the model.
The synthesis server runs from a folder path past espeak-ng's 160-byte data path limit.
"""
import pytest

from tests.integration.backend_process import BackendProcess, dist_path
from tests.integration.rpc_checks import Code, assert_healthy, expect_code
from tests.integration.tiny_models import KOKORO_VOICE, tiny_kokoro
from tests.integration.tts_offline_cases import *  # noqa: F401,F403 (the shared test cases)
from tests.integration.tts_offline_cases import tts
from tests.integration.tts_synthesis import assert_folders_own_espeak, assert_wrote_nothing, deep_folder, load, outside_dirs, speak

RATE = 24_000
# 'ˈola.': 5 phonemes + 2 pads, each 1..4 frames (max_dur 4), at most 28 frames; the long one
# has over 28 phonemes, so at least as many frames: longer audio whatever the random weights.
SHORT = "Hola."
LONG = "Hola, buenos días. ¿Cómo estás?"


@pytest.fixture(scope="module")
def backend_name() -> str:
    return "kokoro"


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    return deep_folder("kokoro", tmp_path_factory.mktemp("kokoro-folder"))


@pytest.fixture(scope="module")
def loaded(deep, tmp_path_factory):
    model = tiny_kokoro(tmp_path_factory.mktemp("tiny-kokoro"), dist_path("kokoro", "cpu").parent)
    outside = outside_dirs(tmp_path_factory.mktemp("outside"))
    with BackendProcess("kokoro", run_sh=deep / "run.sh", env=outside) as proc:
        proc.outside = outside
        load(proc, model)
        yield proc


def test_tts_writes_a_24khz_wav_whose_length_grows_with_the_text(loaded, tmp_path) -> None:
    # the voice by name: voices/ef_dora.pt of the model folder; its first letter: Spanish
    short = speak(loaded, tmp_path / "short.wav", SHORT, RATE, voice=KOKORO_VOICE)
    long = speak(loaded, tmp_path / "long.wav", LONG, RATE, voice=KOKORO_VOICE, language="es")
    assert long.frames > short.frames, (short.frames, long.frames)
    assert_healthy(loaded.stub)


def test_phonemes_come_from_the_folders_own_espeak_at_a_deep_path_and_nothing_is_written(loaded, deep, tmp_path) -> None:
    speak(loaded, tmp_path / "o.wav", SHORT, RATE, voice=KOKORO_VOICE)
    assert_folders_own_espeak(loaded.proc.pid, deep)
    assert_wrote_nothing(loaded.outside)


@pytest.mark.parametrize("fields", [dict(), dict(language="en", voice=KOKORO_VOICE)], ids=["default-voice", "en"])
def test_english_without_spacys_model_is_failed_precondition(loaded, tmp_path, fields) -> None:
    err = expect_code(Code.FAILED_PRECONDITION, loaded.stub.TTS, tts(tmp_path / "o.wav", **fields))
    assert "en_core_web_sm" in err.details()
    assert not (tmp_path / "o.wav").exists()
    assert_healthy(loaded.stub)
