"""backends/bark:cpu-arm64, cross-built on x86_64, served by an aarch64 CPython 3.11 under
qemu-aarch64-static through its run.sh: a 24 kHz WAV from a random 1-layer BarkModel made here
(tiny_models.tiny_bark), transformers' own Bark code path. Emulated timings are emulation's."""
from __future__ import annotations

import os
import wave

from backends.proto import backend_pb2
from tests.integration.aarch64_python import python_on_path
from tests.integration.backend_process import BackendProcess
from tests.integration.rpc_checks import assert_healthy
from tests.integration.tiny_models import BARK_VOICE, tiny_bark

EMULATED = 1800  # seconds: importing torch under qemu-user takes minutes


def test_bark_speaks_under_qemu(tmp_path) -> None:
    qemu_path = f"{python_on_path(tmp_path / 'qemu-bin')}:{os.environ['PATH']}"
    # qemu's default `max` CPU has SVE; oneDNN's JIT (Encodec's convolutions) then dies with SIGILL
    # under qemu. A Neoverse-N1 model (ARMv8.2, no SVE) is what Graviton 2 / Ampere Altra are.
    server = BackendProcess("bark", "cpu-arm64", env={"PATH": qemu_path, "QEMU_CPU": "neoverse-n1"})
    try:
        server.wait_healthy(timeout=EMULATED)
        res = server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(tiny_bark(tmp_path / "tiny-bark"))), timeout=EMULATED)
        assert res.success, res.message + server.output()
        dst = tmp_path / "out.wav"
        res = server.stub.TTS(backend_pb2.TTSRequest(text="hello world", dst=str(dst), voice=BARK_VOICE), timeout=EMULATED)
        assert res.success, res.message
        with wave.open(str(dst), "rb") as w:
            assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24_000)
            assert w.getnframes() > 0 and any(w.readframes(w.getnframes()))
        assert_healthy(server.stub)
    finally:
        server.stop()
