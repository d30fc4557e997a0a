"""A LocalAI-style folder imported unchanged (backends/localai/embeddings-example, written for this
repository in LocalAI's shape: top-level `import backend_pb2`, `../common` grpc_auth, `serve()`
on `--addr`, a CPU requirement file pinning PyPI's CUDA torch==2.7.1), packaged by Pants from
the lock `./pants generate-lockfiles --resolve=localai-embeddings-example-cpu` made, started
with run.sh as LocalAI starts it and called over gRPC with the real all-MiniLM-L6-v2.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, dist_path, pex_distributions, pex_files, pex_path
from tests.integration.rpc_checks import Code, expect_code
from tests.integration.tiny_models import minilm_dir

BACKEND = "localai-embeddings-example"
FORBIDDEN_ON_CPU = ("nvidia", "cuda", "triton")  # 3rdparty/accelerators.toml [cpu] forbidden


@pytest.fixture(scope="module")
def server():
    with BackendProcess(BACKEND) as proc:
        yield proc


@pytest.fixture(scope="module")
def loaded(server):
    res = server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(minilm_dir())), timeout=300)
    assert res.success, res.message
    return server


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_health_answers_ok(server) -> None:
    assert server.stub.Health(backend_pb2.HealthMessage(), timeout=10).message == b"OK"


def test_embedding_matches_sentence_transformers(loaded) -> None:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(minilm_dir()), device="cpu")
    text = "The quick brown fox jumps over the lazy dog."
    res = loaded.stub.Embedding(backend_pb2.PredictOptions(Embeddings=text), timeout=60)
    assert res.dim == len(res.embeddings) == 384
    assert cosine(res.embeddings, reference.encode([text])[0]) >= 1 - 1e-5


def test_rerank_puts_the_relevant_documents_first(loaded) -> None:
    docs = [
        "The stock market fell sharply on Monday.",
        "A recipe for spaghetti with tomato sauce and basil.",
        "My cat likes to sleep on the sofa.",
    ]
    res = loaded.stub.Rerank(backend_pb2.RerankRequest(query="How do I cook spaghetti?", documents=docs), timeout=60)
    assert res.results[0].index == 1 and res.results[0].text == docs[1]
    assert len(res.results) == 3


def test_the_common_grpc_auth_helper_is_packaged_and_enforces_the_token() -> None:
    # grpc_auth comes from backends/localai/common through backend.py's ../common sys.path insert.
    with BackendProcess(BACKEND, env={"LOCALAI_GRPC_AUTH_TOKEN": "s3cret"}) as proc:
        assert proc.stub.Health(backend_pb2.HealthMessage(), metadata=proc.metadata, timeout=10).message == b"OK"
        err = expect_code(Code.UNAUTHENTICATED, proc.stub.Health, backend_pb2.HealthMessage())
        assert err.details() == "invalid token"


def test_pex_lays_out_the_folder_as_localai_backend_py_expects() -> None:
    names = pex_files(pex_path(BACKEND, "cpu"))
    for path in (
        "localai_backend/backend.py",
        "localai_backend/__main__.py",  # runs backend.py with its folder first on sys.path
        "localai_backend/replies.py",  # a sibling module
        "localai_backend/ranking/order.py",  # a sibling package (Health and Rerank need both)
        "common/grpc_auth.py",
        "backend_pb2.py",
        "backend_pb2_grpc.py",
    ):
        assert path in names, path
    assert "localai_backend/test.py" not in names


def test_cpu_artifact_has_cpu_torch_and_no_cuda_package() -> None:
    dists = pex_distributions(pex_path(BACKEND, "cpu"))
    assert any(d.startswith("torch-2.13.0+cpu-") for d in dists), dists
    bad = [d for d in dists if d.lower().startswith(FORBIDDEN_ON_CPU)]
    assert bad == []
    assert not any(d.startswith("grpcio_tools-") for d in dists), "grpcio-tools is build-only"


def test_build_record_records_the_pin_replacement() -> None:
    folder = dist_path(BACKEND, "cpu").parent
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    (record,) = [r for r in records if "artifact_sha256" in r]
    assert record["name"] == BACKEND and record["accelerator"] == "cpu"
    assert record["pin_policy"] == ["requirements-cpu.txt pinned torch==2.7.1; cpu provides torch==2.13.0+cpu"]
