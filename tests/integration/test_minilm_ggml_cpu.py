"""backends/minilm-ggml:cpu: the native engine (engines/minilm) served over gRPC from its PEX,
cross-checked against sentence-transformers and the Python embedding backend (rerankers:cpu)
in the same run."""
from __future__ import annotations

import grpc
import numpy as np
import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, dist_path, packaged_cpu_levels, packaged_levels, pex_distributions, pex_files, pex_path
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.rpc_checks import undecodable_requests_are_invalid_argument
from tests.integration.sealed_folder import SealedBackend
from tests.integration.tiny_models import minilm_dir, minilm_gguf

LEVELS = packaged_cpu_levels()
TEXTS = ["A man is eating food.", "Ünïcödé ünd 日本語のテキスト 🙂", "x" * 3000, "short"]


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    return minilm_gguf(tmp_path_factory.mktemp("gguf"))


@pytest.fixture(scope="module")
def native(gguf):
    with BackendProcess("minilm-ggml") as proc:
        res = proc.stub.LoadModel(backend_pb2.ModelOptions(Model=str(gguf)), timeout=60)
        assert res.success, res.message
        yield proc


@pytest.fixture(scope="module")
def python_backend():
    with BackendProcess("rerankers") as proc:
        res = proc.stub.LoadModel(
            backend_pb2.ModelOptions(Model=str(minilm_dir()), Type="SentenceTransformer"), timeout=300
        )
        assert res.success, res.message
        yield proc


def embed(proc: BackendProcess, text: str) -> np.ndarray:
    return np.array(proc.stub.Embedding(backend_pb2.PredictOptions(Embeddings=text), timeout=60).embeddings)


def cos(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_pex_carries_the_engine_and_no_torch() -> None:
    pex = pex_path("minilm-ggml", "cpu")
    names = pex_files(pex)
    assert packaged_levels(names, "minilm", "libminilm.so") == set(LEVELS)
    assert not [d for d in pex_distributions(pex) if d.startswith(("torch", "nvidia"))]


def test_sbom_names_the_pinned_source_archive_each_engine_was_compiled_from() -> None:
    import json

    sbom = json.loads(dist_path("minilm-ggml", "cpu", "sbom.cdx.json").read_text())
    sources = [c for c in sbom["components"] if c["bom-ref"].startswith("source:")]
    # ggml 0.25.3 from PyPI's llama_cpp_python 0.3.36 sdist, whose published sha256 this is.
    (ref,) = [r for c in sources for r in c["externalReferences"]]
    assert ref["url"].endswith("/llama_cpp_python-0.3.36.tar.gz")
    assert ref["hashes"] == [{"alg": "SHA-256", "content": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"}]
    libraries = [c for c in sbom["components"] if c["bom-ref"].startswith("native:")]
    assert sorted(c["name"] for c in libraries) == [f"minilm/{l}/libminilm.so" for l in sorted(LEVELS)]


def test_native_matches_sentence_transformers_and_the_python_backend(native, python_backend) -> None:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(minilm_dir()), device="cpu")
    for text in TEXTS:
        ours = embed(native, text)
        assert ours.shape == (384,)
        assert cos(ours, reference.encode([text])[0]) >= 0.99999, text
        assert cos(ours, embed(python_backend, text)) >= 0.99999, text


def test_bad_input_gets_grpc_errors_and_the_server_keeps_serving(native, tmp_path) -> None:
    with pytest.raises(grpc.RpcError) as e:
        native.stub.Embedding(backend_pb2.PredictOptions(Embeddings=""), timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # Bytes that are no message: served, control and unserved RPCs, unary and streaming.
    undecodable_requests_are_invalid_argument(
        native.channel, ["Embedding", "LoadModel", "Health", "Free", "Predict", "PredictStream", "Rerank"])
    assert len(embed(native, "still serving")) == 384

    not_gguf = tmp_path / "broken.gguf"
    not_gguf.write_bytes(b"GGUF" + b"\0" * 10)
    for model, code in ((tmp_path / "missing.gguf", grpc.StatusCode.NOT_FOUND), (not_gguf, grpc.StatusCode.INVALID_ARGUMENT)):
        fresh = BackendProcess("minilm-ggml")
        try:
            fresh.wait_healthy()
            with pytest.raises(grpc.RpcError) as e:
                fresh.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model)), timeout=60)
            assert e.value.code() == code, e.value.details()
            assert fresh.stub.Health(backend_pb2.HealthMessage(), timeout=5).message == b"OK"
        finally:
            fresh.stop()
    assert native.stub.Health(backend_pb2.HealthMessage(), timeout=5).message == b"OK"


def test_bad_model_files_answer_clearly(tmp_path) -> None:
    with BackendProcess("minilm-ggml") as proc:
        assert_bad_models_answer_clearly(proc.stub, tmp_path, file_name="model.gguf", takes_folders=False)


def test_a_moved_read_only_folder_with_no_home_embeds_as_built(gguf, native, tmp_path) -> None:
    """The folder copied elsewhere, the root filesystem read-only, HOME nowhere (sealed_folder.py):
    the engine backend loads and embeds exactly as the built folder does, and writes nothing."""
    with SealedBackend("minilm-ggml", "cpu", tmp_path) as sealed:
        res = sealed.stub.LoadModel(backend_pb2.ModelOptions(Model=str(gguf)), timeout=60)
        assert res.success, res.message
        assert np.array_equal(embed(sealed, "a sealed folder"), embed(native, "a sealed folder"))
