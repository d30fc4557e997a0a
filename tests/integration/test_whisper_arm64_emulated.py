"""backends/whisper:cpu-arm64, cross-built on x86_64 by `pants package` (the PEX for the aarch64
complete platform, libwhisper.so cross-compiled with zig for aarch64-linux-gnu.2.28 at ggml's ARM
levels, the Silero VAD converted once for both platforms), served by an aarch64 CPython 3.11
under qemu-aarch64-static through its run.sh, and called over gRPC next to the x86_64 build
(whisper:cpu): the same VAD segments for speech made here, espeak-ng utterances with short
pauses, silence and noise. Timings under emulation are emulation's."""
from __future__ import annotations

import pytest

from backends.proto import backend_pb2
from tests.integration.aarch64_python import aarch64_engine_builds, served_beside_x86_64
from tests.integration.backend_process import dist_path, pex_path
from tests.integration.rpc_checks import assert_healthy
from tests.integration.vad_audio import short_pause_speech, synthetic_speech, vad, vad_cases

EMULATED = 900  # seconds


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    # An empty ModelOptions: VAD only, with the bundled model.
    with served_beside_x86_64("whisper", tmp_path_factory.mktemp("qemu-bin"), EMULATED, load=backend_pb2.ModelOptions()) as pair:
        yield pair


def test_the_arm64_folder_carries_aarch64_engine_builds_and_the_vad_model():
    aarch64_engine_builds("whisper", "whisper-cpp", "libwhisper.so")
    assert list(pex_path("whisper", "cpu-arm64").glob("localai_backend/engines/whisper-cpp/silero-vad/*.bin"))


def test_vad_segments_over_grpc_equal_the_x86_64_build(servers):
    arm, x86 = servers
    segments = {}
    for name, audio in vad_cases(synthetic_speech(), short_pause_speech()).items():
        segments[name] = vad(arm.stub, audio, EMULATED)
        b = vad(x86.stub, audio)
        print({"case": name, "arm64": segments[name], "x86_64": b})
        assert segments[name] == b, (name, segments[name], b)
    assert segments["speech"], "no speech found"
    assert len(segments["short-pauses"]) >= 3, "the short pauses are not split"
    assert_healthy(arm.stub)
