"""backends/transformers:cpu-arm64, cross-built on x86_64, served by an aarch64 CPython 3.11 under
qemu-aarch64-static through its run.sh: a tiny random GPT-2 made here (tiny_models.tiny_gpt2) answers
Predict with the same greedy text as transformers:cpu. Emulated timings are emulation's."""
from __future__ import annotations

import os

from backends.proto import backend_pb2
from tests.integration.aarch64_python import python_on_path
from tests.integration.backend_process import BackendProcess
from tests.integration.rpc_checks import assert_healthy
from tests.integration.tiny_models import tiny_gpt2

EMULATED = 1800  # seconds: importing torch under qemu-user takes minutes


def predict(server: BackendProcess, model: str) -> str:
    res = server.stub.LoadModel(backend_pb2.ModelOptions(Model=model), timeout=EMULATED)
    assert res.success, res.message + server.output()
    reply = server.stub.Predict(backend_pb2.PredictOptions(Prompt="hello world", Tokens=6), timeout=EMULATED)
    assert reply.tokens > 0 and reply.message
    return reply.message.decode()


def test_transformers_predicts_as_x86_64_under_qemu(tmp_path) -> None:
    # Neoverse-N1: ARMv8.2 without SVE (oneDNN's JIT and qemu's `max` CPU: test_bark_arm64_emulated.py).
    qemu_env = {"PATH": f"{python_on_path(tmp_path / 'qemu-bin')}:{os.environ['PATH']}", "QEMU_CPU": "neoverse-n1"}
    model = str(tiny_gpt2(tmp_path / "tiny-gpt2"))
    with BackendProcess("transformers", "cpu") as x86:
        expected = predict(x86, model)
    arm = BackendProcess("transformers", "cpu-arm64", env=qemu_env)
    try:
        arm.wait_healthy(timeout=EMULATED)
        assert predict(arm, model) == expected
        assert_healthy(arm.stub)
    finally:
        arm.stop()
