"""rfdetr's Detect: LocalAI's request/response mapping, with RF-DETR faked at its API
(``model.predict(image, threshold=...)`` returning supervision-style detections)."""
import base64
import io
import types

import grpc
import pytest
from PIL import Image

from backends.common.testing import AbortError, FakeContext, load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


class FakeRFDETR:
    def __init__(self, data=None):
        self.calls = []
        self.data = data or {}  # RF-DETR's predict() puts each row's class name in data["class_name"]

    def predict(self, image, threshold):
        self.calls.append((image.size, image.mode, threshold))
        return types.SimpleNamespace(
            xyxy=[[10, 20, 50, 80], [0, 0, 4, 2]], confidence=[0.9, 0.6], class_id=[1, 7], data=self.data
        )


def png_b64(size=(64, 48)) -> str:
    buf = io.BytesIO()
    Image.new("L", size, 128).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


@pytest.fixture
def servicer():
    s = backend.RFDETRServicer()
    s.model = FakeRFDETR()
    s.names = {1: "person", 7: "truck"}
    return s


def test_detect_maps_corner_boxes_to_localai_centre_and_size(servicer):
    reply = servicer.Detect(backend_pb2.DetectOptions(src=png_b64(), threshold=0.25), FakeContext())
    wire = backend_pb2.DetectResponse.FromString(reply.SerializeToString())
    got = [(d.x, d.y, d.width, d.height, round(d.confidence, 3), d.class_name) for d in wire.Detections]
    assert got == [(30, 50, 40, 60, 0.9, "person"), (2, 1, 4, 2, 0.6, "truck")]
    assert servicer.model.calls == [((64, 48), "RGB", 0.25)]


def test_default_threshold_is_localai_s(servicer):
    servicer.Detect(backend_pb2.DetectOptions(src=png_b64()), FakeContext())
    assert servicer.model.calls[-1][2] == 0.5


def test_image_path_and_data_url_are_accepted(servicer, tmp_path):
    path = tmp_path / "a.png"
    path.write_bytes(base64.b64decode(png_b64((8, 8))))
    servicer.Detect(backend_pb2.DetectOptions(src=str(path)), FakeContext())
    servicer.Detect(backend_pb2.DetectOptions(src="data:image/png;base64," + png_b64((9, 9))), FakeContext())
    assert [c[0] for c in servicer.model.calls] == [(8, 8), (9, 9)]


@pytest.mark.parametrize(
    "options, code, words",
    [
        (dict(src=""), grpc.StatusCode.INVALID_ARGUMENT, "src is empty"),
        (dict(src="a", threshold=1.5), grpc.StatusCode.INVALID_ARGUMENT, "threshold"),
        (dict(src="not base64 !!"), grpc.StatusCode.NOT_FOUND, "image not found"),
        (dict(src=base64.b64encode(b"not an image").decode()), grpc.StatusCode.INVALID_ARGUMENT, "not a readable image"),
    ],
)
def test_bad_input_gets_a_clean_status(servicer, options, code, words):
    with pytest.raises(AbortError) as info:
        servicer.Detect(backend_pb2.DetectOptions(**options), FakeContext())
    assert info.value.code == code and words in info.value.details


def test_unnamed_classes_fall_back_to_the_class_id(servicer):
    servicer.names = None
    reply = servicer.Detect(backend_pb2.DetectOptions(src=png_b64()), FakeContext())
    assert [d.class_name for d in reply.Detections] == ["1", "7"]


def test_rfdetr_s_own_class_names_win_and_its_no_object_slot_is_dropped(servicer):
    # rfdetr >= 1.9 names each row itself (the checkpoint's class names, COCO's by category id)
    # and calls its no-object slot "__background__": not a detection.
    servicer.model = FakeRFDETR(data={"class_name": ["cat", "__background__"]})
    reply = servicer.Detect(backend_pb2.DetectOptions(src=png_b64(), threshold=0.25), FakeContext())
    assert [(d.x, d.y, d.class_name) for d in reply.Detections] == [(30, 50, "cat")]


def test_rows_rfdetr_leaves_unnamed_fall_back_to_names(servicer):
    servicer.model = FakeRFDETR(data={"class_name": ["", "bird"]})
    reply = servicer.Detect(backend_pb2.DetectOptions(src=png_b64()), FakeContext())
    assert [d.class_name for d in reply.Detections] == ["person", "bird"]
