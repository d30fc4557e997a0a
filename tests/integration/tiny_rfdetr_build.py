"""Writes a random-weight RF-DETR Nano as RF-DETR itself writes a trained model for deployment:
``RFDETR.export_for_roboflow`` (weights.pt, torch.save of {"model": state dict, "args": the
model's namespace with class_names}, plus class_names.txt). That is the file
``RFDETRNano(pretrain_weights=<weights.pt>)`` loads, the backend's LoadModel path.

Run by tests/integration/test_rfdetr_arm64_emulated.py with the rfdetr backend folder's own
interpreter and site-packages/ (`python -I -S -B tiny_rfdetr_build.py <site-packages> <out>
<class>...`): rfdetr needs torchvision, which the tests resolve cannot hold on x86_64 (PyPI's is
CUDA-linked), so the model is made by the rfdetr the backend serves it with. Not part of the
tests' python_sources: a file the test runs.

Offline: ``pretrain_weights=None`` skips RF-DETR's checkpoint download, and Nano's patch size 16
(DINOv2's is 14) makes RF-DETR build its windowed DINOv2 backbone from the config bundled in the
package with random weights instead of fetching facebook/dinov2-with-registers-small. The
architecture is Nano's own (resolution 384, 2 decoder layers) with one output per declared class
(plus RF-DETR's no-object slot). The classification head is re-drawn (normal, std 0.02, no bias)
so that random scores spread around 0.5 instead of sitting at the focal-loss prior 0.01: a
threshold then keeps some detections and drops others.
"""
import site
import sys
from pathlib import Path


def main(site_packages: str, out: str, classes: list[str]) -> None:
    site.addsitedir(site_packages)
    import torch
    from rfdetr import RFDETRNano

    torch.manual_seed(0)
    model = RFDETRNano(pretrain_weights=None, num_classes=len(classes))
    detector = model.model.model  # RFDETR -> ModelContext -> LWDETR (torch.nn.Module)
    with torch.no_grad():
        torch.nn.init.normal_(detector.class_embed.weight, std=0.02)
        torch.nn.init.zeros_(detector.class_embed.bias)
    # What a training run records: the dataset's class names in the model's args.
    model.model.args.class_names = list(classes)
    model.model.class_names = list(classes)  # what class_names.txt is written from
    Path(out).mkdir(parents=True, exist_ok=True)
    model.export_for_roboflow(out)
    print(Path(out) / "weights.pt")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
