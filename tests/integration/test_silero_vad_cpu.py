"""backends/silero-vad:cpu, packaged by Pants, started as LocalAI starts it, called over gRPC.

The model is the real Silero VAD ONNX bundled in the silero-vad package (LoadModel with an
empty Model). Speech is espeak-ng (installed by tests/tools/install-debian-tools.sh when missing)
and a synthetic voiced signal (pulse train through moving formants, in syllables); silence and
faint noise must give no segment.
"""
from __future__ import annotations

import numpy as np
import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.registry import debian_tool
from tests.integration.rpc_checks import Code, assert_healthy, expect_code, second_load_is_aborted, state
from tests.integration.tiny_models import SAMPLE_RATE, espeak_voice, synthetic_voice

LEAD = 1.0  # seconds of silence before the speech
TAIL = 1.5  # and after it


@pytest.fixture(scope="module")
def server():
    with BackendProcess("silero-vad") as proc:
        yield proc


def vad(stub, audio) -> list[tuple[float, float]]:
    res = stub.VAD(backend_pb2.VADRequest(audio=np.asarray(audio, dtype=np.float32).tolist()), timeout=120)
    return [(s.start, s.end) for s in res.segments]


def test_vad_before_load_is_failed_precondition(server) -> None:
    expect_code(Code.FAILED_PRECONDITION, server.stub.VAD, backend_pb2.VADRequest(audio=[0.0] * 512))
    assert_healthy(server.stub)


def test_load_model_errors(server, tmp_path) -> None:
    err = expect_code(Code.NOT_FOUND, server.stub.LoadModel, backend_pb2.ModelOptions(Model=str(tmp_path / "vad.onnx")))
    assert "vad.onnx" in err.details()
    not_onnx = tmp_path / "model.bin"
    not_onnx.write_bytes(b"\0" * 16)
    expect_code(Code.INVALID_ARGUMENT, server.stub.LoadModel, backend_pb2.ModelOptions(Model=str(not_onnx)))
    assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED
    assert_healthy(server.stub)


def test_bad_model_files_answer_clearly(server, tmp_path) -> None:
    assert_bad_models_answer_clearly(server.stub, tmp_path, file_name="model.onnx", takes_folders=False)


def test_second_load_while_one_is_in_flight_is_aborted(server) -> None:
    second_load_is_aborted(
        server.stub,
        backend_pb2.ModelOptions(),  # empty Model: the bundled silero_vad.onnx
        model_rpc=lambda: server.stub.VAD(backend_pb2.VADRequest(audio=[0.0] * 512), timeout=60),
    )
    assert_healthy(server.stub)


@pytest.fixture(scope="module")
def loaded(server):
    res = server.stub.LoadModel(backend_pb2.ModelOptions(), timeout=120)
    assert res.success, res.message
    return server


@pytest.mark.parametrize("source", ["synthetic", "espeak-ng"])
def test_speech_between_silences_gives_segments_inside_the_speech(loaded, source) -> None:
    if source == "synthetic":
        speech = synthetic_voice(3.0)
    else:
        debian_tool("espeak-ng")
        speech = espeak_voice("Hello there, this is a test of voice activity detection.")
        assert speech is not None
    silence_lead = np.zeros(int(LEAD * SAMPLE_RATE), np.float32)
    silence_tail = np.zeros(int(TAIL * SAMPLE_RATE), np.float32)
    audio = np.concatenate([silence_lead, speech, silence_tail])
    total = len(audio) / SAMPLE_RATE
    speech_end = LEAD + len(speech) / SAMPLE_RATE

    segments = vad(loaded.stub, audio)
    assert segments, "no speech found"
    pad = 0.1  # the backend pads segments by 30 ms; a window is 32 ms
    for start, end in segments:
        assert 0 <= start < end <= total
        assert start >= LEAD - pad, f"segment {start:.2f}-{end:.2f} starts in the leading silence"
        assert end <= speech_end + pad + 0.2, f"segment {start:.2f}-{end:.2f} runs into the trailing silence"
    # Ordered, not overlapping, and they cover most of the speech.
    assert all(a[1] <= b[0] for a, b in zip(segments, segments[1:])), segments
    covered = sum(e - s for s, e in segments)
    assert covered >= 0.5 * (speech_end - LEAD), (segments, speech_end - LEAD)


@pytest.mark.parametrize(
    "audio",
    [np.zeros(2 * SAMPLE_RATE, np.float32), (np.random.default_rng(1).standard_normal(2 * SAMPLE_RATE) * 0.005)],
    ids=["silence", "faint-noise"],
)
def test_silence_gives_no_segment(loaded, audio) -> None:
    assert vad(loaded.stub, audio) == []


def test_a_partial_window_is_accepted(loaded) -> None:
    assert vad(loaded.stub, np.zeros(100, np.float32)) == []


@pytest.mark.parametrize(
    "samples,what",
    [([], "empty"), ([0.0, float("nan"), 0.0], "NaN"), ([0.0, float("inf")], "inf")],
    ids=["empty", "nan", "inf"],
)
def test_bad_audio_is_invalid_argument(loaded, samples, what) -> None:
    expect_code(Code.INVALID_ARGUMENT, loaded.stub.VAD, backend_pb2.VADRequest(audio=samples))
    assert_healthy(loaded.stub)
    assert state(loaded.stub) == backend_pb2.StatusResponse.READY
