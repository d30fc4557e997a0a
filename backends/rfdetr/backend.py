"""LocalAI rfdetr backend: object detection with RF-DETR, served as LocalAI's ``Detect``.

DetectOptions.src is base64 image data (as LocalAI sends it; a data URL or a file path also
works); DetectOptions.threshold, when > 0, is the confidence threshold (default 0.5, as
LocalAI's). Each Detection is a box as LocalAI's rfdetr backend reports it: x, y the box
centre, width, height in pixels, confidence and class name.
"""

import base64
import io
import os

from backends.common.errors import InvalidArgument, NotFound, require
from backends.common.model_files import check_model
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

DEFAULT_THRESHOLD = 0.5
NO_OBJECT = "__background__"  # RF-DETR's name for its no-object class slot
VARIANTS = ("RFDETRNano", "RFDETRSmall", "RFDETRBase", "RFDETRMedium", "RFDETRLarge")


def open_image_source(ref: str):
    """Bytes stream or path for PIL: an existing path, else base64 (optionally a data URL)."""
    if os.path.isfile(ref):
        return ref
    data = ref.split(",", 1)[1] if ref.startswith("data:") else ref
    try:
        return io.BytesIO(base64.b64decode(data, validate=True))
    except Exception:
        raise NotFound(f"image not found (and not base64): {ref[:80]}") from None


def to_detections(xyxy, confidence, class_id, names=None, row_names=None) -> list:
    """RF-DETR's (supervision) corner boxes -> LocalAI's centre/size ``Detection`` messages.

    ``row_names``: the class name of each row as RF-DETR's predict() names it
    (``detections.data["class_name"]``: the checkpoint's class names, COCO's by category id for
    the pretrained models); a row it names ``__background__`` is RF-DETR's no-object slot, not a
    detection, and is dropped. Rows it leaves unnamed fall back to ``names`` (a dict or list by
    class id), else the class id."""
    out = []
    if row_names is None:
        row_names = [""] * len(class_id)
    for box, conf, cls, row_name in zip(xyxy, confidence, class_id, row_names):
        x1, y1, x2, y2 = (float(v) for v in box)
        if row_name == NO_OBJECT:
            continue
        if row_name:
            name = str(row_name)
        elif isinstance(names, dict):
            name = names.get(int(cls), str(int(cls)))
        elif names is not None and 0 <= int(cls) < len(names):
            name = str(names[int(cls)])
        else:
            name = str(int(cls))
        out.append(
            backend_pb2.Detection(
                x=(x1 + x2) / 2, y=(y1 + y2) / 2, width=x2 - x1, height=y2 - y1,
                confidence=float(conf), class_name=name,
            )
        )
    return out


class RFDETRServicer(BaseServicer):
    allow_empty_model = True
    model_expects = "RF-DETR weights (a .pth checkpoint written by torch.save)"
    # Class names by class id, for a model whose predict() names no class (RF-DETR's does).
    names = None

    def resolve_path(self, request):
        if not request.Model or request.Model in VARIANTS:
            return ""
        return super().resolve_path(request)

    def load(self, request, path):
        import rfdetr

        variant = request.Type or (request.Model if request.Model in VARIANTS else "RFDETRBase")
        cls = getattr(rfdetr, variant, None)
        if cls is None:
            raise InvalidArgument(f"unknown RF-DETR variant {variant!r}: one of {', '.join(VARIANTS)}")
        if path:
            check_model(path, self.model_expects, file_formats=("zip", "pickle"))
        return cls(pretrain_weights=path) if path else cls()

    def Detect(self, request, context):
        threshold = request.threshold if request.threshold > 0 else DEFAULT_THRESHOLD
        require(threshold <= 1, f"threshold must be <= 1, got {threshold}")
        require(bool(request.src), "src is empty: give base64 image data (or an image path)")
        source = open_image_source(request.src)
        model = self.require_model()
        from PIL import Image, UnidentifiedImageError

        try:
            image = Image.open(source).convert("RGB")
        except (UnidentifiedImageError, OSError) as exc:
            raise InvalidArgument(f"src is not a readable image: {exc}") from None
        det = model.predict(image, threshold=threshold)
        data = getattr(det, "data", None) or {}
        return backend_pb2.DetectResponse(
            Detections=to_detections(det.xyxy, det.confidence, det.class_id, self.names, data.get("class_name"))
        )


def main(argv=None):
    run(RFDETRServicer, argv)


if __name__ == "__main__":
    main()
