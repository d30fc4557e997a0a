"""backends/rerankers:cpu-arm64, cross-built on x86_64 by `pants package`, served by an aarch64
CPython 3.11 under qemu-aarch64-static (its run.sh, as LocalAI starts it) and called over gRPC
next to the x86_64 build (rerankers:cpu): same embeddings (cosine > 0.9999) and the same ranking
from the real all-MiniLM-L6-v2 and from a tiny random cross-encoder made here. Emulated timings
are emulation's, never arm64's."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from backends.proto import backend_pb2
from tests.integration.aarch64_python import served_beside_x86_64
from tests.integration.backend_process import BackendProcess, dist_path, pex_distributions, pex_path
from tests.integration.rpc_checks import assert_healthy
from tests.integration.tiny_models import minilm_dir, tiny_cross_encoder

QUERY = "How do I cook spaghetti?"
DOCUMENTS = [
    "The stock market fell sharply on Monday.",
    "Boil the pasta in salted water for ten minutes, then drain it.",
    "My cat likes to sleep on the sofa.",
    "A recipe for spaghetti with tomato sauce and basil.",
]
TEXTS = ["hello world", "LocalAI runs models on arm64 too.", "Ünïcödé 🙂"]
EMULATED = 1800  # seconds: importing torch under qemu-user takes minutes


def elf_machine(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[18:20], "little")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    with served_beside_x86_64("rerankers", tmp_path_factory.mktemp("qemu-bin"), EMULATED) as pair:
        yield pair


def test_the_arm64_folder_is_an_aarch64_build():
    record = json.loads(dist_path("rerankers", "cpu-arm64", "build-record.json").read_text())
    assert (record["platform"], record["resolve"]) == ("linux_aarch64", "rerankers-cpu-arm64")
    pex = pex_path("rerankers", "cpu-arm64")
    dists = pex_distributions(pex)
    torch = [d for d in dists if d.startswith("torch-")]
    assert torch and torch[0].startswith("torch-2.9.1-") and "aarch64" in torch[0], dists
    assert not [d for d in dists if d.startswith(("nvidia", "grpcio_tools"))], dists
    assert all("x86_64" not in d for d in dists), dists
    image_dir = Path("images/rerankers/cpu-arm64")  # where `pants package` puts the variant's image
    image = json.loads((image_dir / "image.json").read_text())
    layout = image_dir / "layout"
    manifest = json.loads((layout / "blobs/sha256" / image["manifest_digest"].split(":")[1]).read_text())
    config = json.loads((layout / "blobs/sha256" / manifest["config"]["digest"].split(":")[1]).read_text())
    assert (config["architecture"], config["os"]) == ("arm64", "linux")


def load(server: BackendProcess, model: Path) -> None:
    res = server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model)), timeout=EMULATED)
    assert res.success, res.message + server.output()


def ranking(server: BackendProcess) -> list[tuple[int, float]]:
    res = server.stub.Rerank(backend_pb2.RerankRequest(query=QUERY, documents=DOCUMENTS), timeout=EMULATED)
    return [(r.index, r.relevance_score) for r in res.results]


def test_embeddings_and_ranking_equal_the_x86_64_build(servers, tmp_path):
    arm, x86 = servers
    for server in servers:
        load(server, minilm_dir())
    for text in TEXTS:
        a, b = (np.asarray(s.stub.Embedding(backend_pb2.PredictOptions(Embeddings=text), timeout=EMULATED).embeddings) for s in servers)
        assert a.shape == b.shape == (384,)
        assert float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) > 0.9999, text
    got, expected = ranking(arm), ranking(x86)
    assert [i for i, _ in got] == [i for i, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-4)

    cross_encoder = tiny_cross_encoder(tmp_path / "tiny-ce")
    for server in servers:
        load(server, cross_encoder)
    got, expected = ranking(arm), ranking(x86)
    assert [i for i, _ in got] == [i for i, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-4)
    assert_healthy(arm.stub)
