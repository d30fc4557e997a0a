"""LocalAI's folder layout on linux/arm64: backends/localai/embeddings-example:cpu-arm64 (declared by
`localai-import` for every folder with a CPU profile, pin policy [localai.torch_family.cpu-arm64]),
cross-built on x86_64 by `pants package`, served by an aarch64 CPython 3.11 under
qemu-aarch64-static through its run.sh and called over gRPC next to the x86_64 build (:cpu): the
same all-MiniLM-L6-v2 embeddings (cosine > 0.9999) and the same Rerank order. Emulated timings are
emulation's, never arm64's."""
from __future__ import annotations

import json

import numpy as np
import pytest

from backends.proto import backend_pb2
from tests.integration.aarch64_python import served_beside_x86_64
from tests.integration.backend_process import dist_path, pex_distributions, pex_path
from tests.integration.tiny_models import minilm_dir

BACKEND = "localai-embeddings-example"
TEXTS = ["hello world", "LocalAI runs models on arm64 too."]
QUERY = "How do I cook spaghetti?"
DOCUMENTS = ["The stock market fell sharply on Monday.", "Boil the pasta in salted water, then drain it.", "My cat sleeps."]
EMULATED = 1800  # seconds: importing torch under qemu-user takes minutes


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    with served_beside_x86_64(BACKEND, tmp_path_factory.mktemp("qemu-bin"), EMULATED,
                              load=backend_pb2.ModelOptions(Model=str(minilm_dir()))) as pair:
        yield pair


def test_the_arm64_folder_is_an_aarch64_build_with_the_arm64_pin_policy() -> None:
    record = json.loads(dist_path(BACKEND, "cpu-arm64", "build-record.json").read_text())
    assert (record["platform"], record["resolve"]) == ("linux_aarch64", "localai-embeddings-example-cpu-arm64")
    assert record["pin_policy"] == ["requirements-cpu.txt pinned torch==2.7.1; cpu-arm64 provides torch==2.9.1"]
    dists = pex_distributions(pex_path(BACKEND, "cpu-arm64"))
    torch = [d for d in dists if d.startswith("torch-")]
    assert torch and torch[0].startswith("torch-2.9.1-") and "aarch64" in torch[0], dists
    assert not [d for d in dists if d.lower().startswith(("nvidia", "cuda", "triton", "grpcio_tools"))], dists
    assert all("x86_64" not in d for d in dists), dists


def test_embeddings_and_rerank_order_equal_the_x86_64_build(servers) -> None:
    for text in TEXTS:
        a, b = (np.asarray(s.stub.Embedding(backend_pb2.PredictOptions(Embeddings=text), timeout=EMULATED).embeddings)
                for s in servers)
        assert a.shape == b.shape == (384,)
        assert float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) > 0.9999, text
    arm, x86 = ([r.index for r in s.stub.Rerank(backend_pb2.RerankRequest(query=QUERY, documents=DOCUMENTS),
                                                timeout=EMULATED).results] for s in servers)
    assert arm == x86 and arm[0] == 1
