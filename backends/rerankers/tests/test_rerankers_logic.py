import pytest

from backends.common.errors import InvalidArgument
from backends.common.testing import load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


@pytest.mark.parametrize("req,match", [
    (backend_pb2.RerankRequest(query="", documents=["a"]), "query"),
    (backend_pb2.RerankRequest(query="q", documents=[]), "documents"),
    (backend_pb2.RerankRequest(query="q", documents=["a"], top_n=-1), "top_n"),
])
def test_invalid_rerank_requests(req, match):
    with pytest.raises(InvalidArgument, match=match):
        backend.validate_rerank(req)


def test_rank_sorts_and_cuts():
    res = backend.rank([0.1, 0.9, 0.5], ["a", "b", "c"], 2)
    assert [(r.index, r.text) for r in res] == [(1, "b"), (2, "c")]
    assert len(backend.rank([0.1, 0.9, 0.5], ["a", "b", "c"], 0)) == 3


def test_model_kind_detection(tmp_path):
    req = backend_pb2.ModelOptions()
    assert not backend.is_sentence_transformer(req, str(tmp_path))
    (tmp_path / "modules.json").write_text("[]")
    assert backend.is_sentence_transformer(req, str(tmp_path))
    assert not backend.is_sentence_transformer(backend_pb2.ModelOptions(Type="CrossEncoder"), str(tmp_path))
    assert backend.is_sentence_transformer(backend_pb2.ModelOptions(Type="SentenceTransformer"), "")
