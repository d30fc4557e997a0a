import pytest

from backends.common.errors import InvalidArgument, NotFound
from backends.common.testing import load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


def req(tmp_path, **kw):
    base = dict(positive_prompt="a cat", width=64, height=64, dst=str(tmp_path / "o.png"))
    base.update(kw)
    return backend_pb2.GenerateImageRequest(**base)


def test_valid_request_passes(tmp_path):
    backend.validate_image_request(req(tmp_path))


@pytest.mark.parametrize("kw,match", [
    ({"width": 0}, "width"), ({"height": 4104}, "height"), ({"width": 60}, "multiple of 8"),
    ({"positive_prompt": ""}, "positive_prompt"), ({"dst": ""}, "dst"), ({"step": -1}, "step"),
])
def test_invalid_requests(tmp_path, kw, match):
    with pytest.raises(InvalidArgument, match=match):
        backend.validate_image_request(req(tmp_path, **kw))


def test_missing_output_dir_and_src(tmp_path):
    with pytest.raises(NotFound):
        backend.validate_image_request(req(tmp_path, dst=str(tmp_path / "no" / "o.png")))
    with pytest.raises(NotFound, match="src"):
        backend.validate_image_request(req(tmp_path, src=str(tmp_path / "in.png")))
