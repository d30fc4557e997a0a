"""LocalAI rfdetr backend: object detection with RF-DETR.

Detect is not in this proto, so Predict carries it: PredictOptions.Images[0] is an image path
(or base64 data), and the Reply message is JSON:
``{"detections": [{"x1":..,"y1":..,"x2":..,"y2":..,"confidence":..,"class_id":..,"class_name":..}]}``.
PredictOptions.Temperature, when > 0, is used as the confidence threshold (default 0.5).
"""

import base64
import io
import json
import os

from backends.common.errors import InvalidArgument, NotFound, require
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

DEFAULT_THRESHOLD = 0.5
VARIANTS = ("RFDETRNano", "RFDETRSmall", "RFDETRBase", "RFDETRMedium", "RFDETRLarge")


def open_image_source(ref: str):
    """Bytes stream or path for PIL: an existing path, else base64 (optionally a data URL)."""
    require(bool(ref), "Images[0] is empty: give an image path or base64 data")
    if os.path.isfile(ref):
        return ref
    data = ref.split(",", 1)[1] if ref.startswith("data:") else ref
    try:
        return io.BytesIO(base64.b64decode(data, validate=True))
    except Exception:  # noqa: BLE001
        raise NotFound(f"image not found (and not base64): {ref[:80]}") from None


def detections_json(xyxy, confidence, class_id, names=None) -> str:
    out = []
    for box, conf, cls in zip(xyxy, confidence, class_id):
        item = {"x1": float(box[0]), "y1": float(box[1]), "x2": float(box[2]), "y2": float(box[3]),
                "confidence": float(conf), "class_id": int(cls)}
        if names is not None:
            item["class_name"] = names.get(int(cls), str(int(cls))) if isinstance(names, dict) else str(names[int(cls)])
        out.append(item)
    return json.dumps({"detections": out})


class RFDETRServicer(BaseServicer):
    allow_empty_model = True

    def resolve_path(self, request):
        if not request.Model or request.Model in VARIANTS:
            return ""
        return super().resolve_path(request)

    def load(self, request, path):
        import rfdetr  # noqa: PLC0415

        variant = request.Type or (request.Model if request.Model in VARIANTS else "RFDETRBase")
        cls = getattr(rfdetr, variant, None)
        if cls is None:
            raise InvalidArgument(f"unknown RF-DETR variant {variant!r}: one of {', '.join(VARIANTS)}")
        model = cls(pretrain_weights=path) if path else cls()
        try:
            from rfdetr.util.coco_classes import COCO_CLASSES  # noqa: PLC0415

            self.names = COCO_CLASSES
        except Exception:  # noqa: BLE001
            self.names = None
        return model

    def Predict(self, request, context):
        require(len(request.Images) > 0, "Images is empty: Predict detects objects in Images[0]")
        threshold = request.Temperature if request.Temperature > 0 else DEFAULT_THRESHOLD
        require(threshold <= 1, f"threshold (Temperature) must be <= 1, got {threshold}")
        source = open_image_source(request.Images[0])
        model = self.require_model()
        from PIL import Image  # noqa: PLC0415

        image = Image.open(source).convert("RGB")
        det = model.predict(image, threshold=threshold)
        return backend_pb2.Reply(message=detections_json(det.xyxy, det.confidence, det.class_id, self.names).encode())


def main(argv=None):
    run(RFDETRServicer, argv)


if __name__ == "__main__":
    main()
