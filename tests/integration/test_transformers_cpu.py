"""backends/transformers:cpu, packaged by Pants, started as LocalAI starts it, called over gRPC."""
from __future__ import annotations

import grpc
import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, pex_distributions, pex_path
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.sealed_folder import SealedBackend
from tests.integration.tiny_models import tiny_gpt2


@pytest.fixture(scope="module")
def server():
    with BackendProcess("transformers") as proc:
        yield proc


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


def test_artifact_holds_cpu_torch_and_no_cuda_package() -> None:
    dists = pex_distributions(pex_path("transformers", "cpu"))
    assert any(d.startswith("torch-2.13.0+cpu-") for d in dists), dists
    bad = [d for d in dists if d.lower().startswith(("nvidia", "cuda", "triton"))]
    assert bad == []


def test_model_rpc_before_load_is_failed_precondition(server) -> None:
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Predict(backend_pb2.PredictOptions(Prompt="hello"), timeout=30)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert server.stub.Health(backend_pb2.HealthMessage(), timeout=5).message == b"OK"


def test_missing_model_path_is_not_found(server, tmp_path) -> None:
    with pytest.raises(grpc.RpcError) as e:
        server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(tmp_path / "nope")), timeout=60)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert "nope" in e.value.details()


def test_bad_model_files_answer_clearly(server, tmp_path) -> None:
    assert_bad_models_answer_clearly(server.stub, tmp_path)


def test_load_predict_stream_embed(server, model) -> None:
    res = server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model)), timeout=300)
    assert res.success, res.message

    reply = server.stub.Predict(backend_pb2.PredictOptions(Prompt="hello world", Tokens=6), timeout=120)
    assert reply.tokens > 0 and reply.message

    chunks = list(server.stub.PredictStream(backend_pb2.PredictOptions(Prompt="hello world", Tokens=6), timeout=120))
    assert len(chunks) > 1, "PredictStream must stream tokens one by one, not one final reply"
    assert all(c.message for c in chunks)
    # LocalAI takes a stream's usage from every reply (core/backend/llm.go): tokens generated so
    # far and the prompt's length; with IgnoreEOS the stream ends after exactly Tokens tokens.
    n_prompt = server.stub.TokenizeString(backend_pb2.PredictOptions(Prompt="hello world"), timeout=30).length
    full = list(server.stub.PredictStream(
        backend_pb2.PredictOptions(Prompt="hello world", Tokens=6, IgnoreEOS=True), timeout=120))
    counts = [c.tokens for c in full]
    assert counts == sorted(counts) and counts[0] >= 1 and counts[-1] == 6, counts
    assert {c.prompt_tokens for c in full} == {n_prompt}

    emb = server.stub.Embedding(backend_pb2.PredictOptions(Embeddings="hello world"), timeout=60)
    assert len(emb.embeddings) == 32  # n_embd of the tiny model


def test_a_moved_read_only_folder_with_no_home_serves_and_writes_nothing(server, model, tmp_path) -> None:
    """The folder copied elsewhere, the root filesystem read-only, HOME nowhere (sealed_folder.py):
    torch and transformers import from the compiled site-packages/, the model loads, and greedy
    text equals the built folder's; nothing is written, in the folder or outside it."""
    opts = backend_pb2.PredictOptions(Prompt="hello world", Tokens=6, Temperature=0, IgnoreEOS=True)
    assert server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model)), timeout=300).success
    with SealedBackend("transformers", "cpu", tmp_path) as sealed:
        res = sealed.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model)), timeout=300)
        assert res.success, res.message
        assert sealed.stub.Predict(opts, timeout=120).message == server.stub.Predict(opts, timeout=120).message


def test_empty_prompt_is_invalid_argument_and_server_survives(server) -> None:
    with pytest.raises(grpc.RpcError) as e:
        server.stub.Predict(backend_pb2.PredictOptions(Prompt=""), timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert server.stub.Health(backend_pb2.HealthMessage(), timeout=5).message == b"OK"


@pytest.mark.parametrize(
    "call, limit",
    [
        # The tiny model's context is 128 tokens (n_positions in tiny_models.py).
        (lambda stub: stub.Predict(backend_pb2.PredictOptions(Prompt="hello world " * 200), timeout=60), "context is 128"),
        (lambda stub: list(stub.PredictStream(backend_pb2.PredictOptions(Prompt="hello world " * 200), timeout=60)), "context is 128"),
        (lambda stub: stub.Predict(backend_pb2.PredictOptions(Prompt="hello world", Tokens=1000), timeout=60), "context of 128"),
        (lambda stub: stub.Embedding(backend_pb2.PredictOptions(Embeddings="hello world " * 200), timeout=60), "context is 128"),
    ],
    ids=["prompt", "stream-prompt", "tokens", "embedding"],
)
def test_input_past_the_context_is_invalid_argument_naming_the_limit(server, model, call, limit) -> None:
    assert server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model)), timeout=300).success
    with pytest.raises(grpc.RpcError) as e:
        call(server.stub)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    assert limit in e.value.details()
    # A default-length generation near the limit is shortened to fit, not refused.
    reply = server.stub.Predict(backend_pb2.PredictOptions(Prompt="hello world " * 20), timeout=120)
    assert reply.tokens > 0
    assert server.stub.Health(backend_pb2.HealthMessage(), timeout=5).message == b"OK"


def test_sigterm_stops_the_server_cleanly(model) -> None:
    proc = BackendProcess("transformers")
    proc.wait_healthy()
    assert proc.stop() == 0
