"""backends/rfdetr:cpu-arm64, cross-built on x86_64, served by an aarch64 CPython 3.11 under
qemu-aarch64-static through its run.sh: Detect with a random-weight RF-DETR Nano.

The model is made in the test, offline, by the folder's own rfdetr under the same emulation
(tiny_models.tiny_rfdetr: ``pretrain_weights=None``, Nano's patch size 16 builds the DINOv2
backbone from the package's bundled config with random weights; written by RF-DETR's own
export_for_roboflow, class names cat/dog/bird in the checkpoint). x86_64 cannot make it: rfdetr
needs torchvision, and PyPI's x86_64 torchvision is CUDA-linked (rfdetr:cpu is not lockable here).

Random weights say nothing about what is found, so the checks are the invariants of a detector's
answer: every box inside the image (a wide image, so swapped axes show), width and height >= 0,
scores in [0, 1] and above the threshold asked, class names only those the checkpoint declares
(never RF-DETR's no-object slot), and a higher threshold gives exactly the earlier answer's
boxes that score above it. Bad model files answer NOT_FOUND/INVALID_ARGUMENT/FAILED_PRECONDITION
naming the file. Emulated timings are emulation's, never arm64's."""
from __future__ import annotations

import base64
import io
import os
import time

import torch
from PIL import Image, ImageDraw

from backends.proto import backend_pb2
from tests.integration.aarch64_python import python_on_path
from tests.integration.backend_process import BackendProcess, dist_path, pex_distributions, pex_path
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.rpc_checks import Code, assert_healthy, expect_code, state
from tests.integration.tiny_models import RFDETR_CLASSES, tiny_rfdetr

EMULATED = 1800  # seconds: importing torch and running a ViT under qemu-user take minutes
WIDTH, HEIGHT = 320, 160
EPS = 1e-3  # pixels: float32 boxes clamped to the image by RF-DETR, then centre/size here


def image_b64() -> str:
    """A PNG made here: a wide picture with a few filled shapes on a gradient."""
    img = Image.new("RGB", (WIDTH, HEIGHT))
    img.putdata([(x * 255 // WIDTH, y * 255 // HEIGHT, 128) for y in range(HEIGHT) for x in range(WIDTH)])
    draw = ImageDraw.Draw(img)
    draw.rectangle((20, 30, 90, 120), fill=(200, 40, 40))
    draw.ellipse((150, 20, 230, 100), fill=(40, 200, 40))
    draw.polygon([(260, 140), (310, 140), (285, 60)], fill=(40, 40, 220))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def detect(stub, src: str, threshold: float) -> list[backend_pb2.Detection]:
    reply = stub.Detect(backend_pb2.DetectOptions(src=src, threshold=threshold), timeout=EMULATED)
    return list(reply.Detections)


def assert_well_formed(detections, threshold: float) -> None:
    for d in detections:
        assert d.width >= 0 and d.height >= 0, d
        assert d.x - d.width / 2 >= -EPS and d.x + d.width / 2 <= WIDTH + EPS, d
        assert d.y - d.height / 2 >= -EPS and d.y + d.height / 2 <= HEIGHT + EPS, d
        assert 0.0 <= d.confidence <= 1.0 and d.confidence > threshold, d
        assert d.class_name in RFDETR_CLASSES, d


def key(d: backend_pb2.Detection) -> tuple:
    return (round(d.x, 2), round(d.y, 2), round(d.width, 2), round(d.height, 2), d.class_name)


def test_rfdetr_detects_under_qemu(tmp_path) -> None:
    pex = pex_path("rfdetr", "cpu-arm64")
    dists = pex_distributions(pex)
    assert [d for d in dists if d.startswith("torchvision-") and "aarch64" in d], dists
    assert not [d for d in dists if "x86_64" in d or d.lower().startswith(("nvidia", "triton"))], dists

    # qemu's default `max` CPU has SVE, which oneDNN's JIT (the convolutions) dies on under
    # emulation (bark-arm64-emulated); Neoverse-N1 is ARMv8.2 without SVE (Graviton 2).
    env = {"PATH": f"{python_on_path(tmp_path / 'qemu-bin')}:{os.environ['PATH']}", "QEMU_CPU": "neoverse-n1"}
    start = time.monotonic()
    weights = tiny_rfdetr(tmp_path / "tiny-rfdetr", dist_path("rfdetr", "cpu-arm64").parent, env)
    print(f"tiny RF-DETR Nano made under qemu in {time.monotonic() - start:.1f} s")

    server = BackendProcess("rfdetr", "cpu-arm64", env=env)
    try:
        print(f"healthy under qemu in {server.wait_healthy(timeout=EMULATED):.1f} s")
        src = image_b64()
        expect_code(Code.FAILED_PRECONDITION, server.stub.Detect, backend_pb2.DetectOptions(src=src))

        # Bad files first: a failed LoadModel leaves no model, which the cases check.
        assert_bad_models_answer_clearly(server.stub, tmp_path / "bad", file_name="weights.pt",
                                         takes_folders=False, Type="RFDETRNano")
        not_rfdetr = tmp_path / "not-rfdetr" / "weights.pt"  # a real torch checkpoint, not RF-DETR's
        not_rfdetr.parent.mkdir()
        torch.save({"weights": torch.zeros(3)}, not_rfdetr)
        err = expect_code(Code.FAILED_PRECONDITION, server.stub.LoadModel,
                          backend_pb2.ModelOptions(Model=str(not_rfdetr), Type="RFDETRNano"), timeout=EMULATED)
        assert str(not_rfdetr) in err.details(), err.details()
        assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED

        start = time.monotonic()
        res = server.stub.LoadModel(backend_pb2.ModelOptions(Model=str(weights), Type="RFDETRNano"), timeout=EMULATED)
        assert res.success, res.message + server.output()
        print(f"LoadModel under qemu in {time.monotonic() - start:.1f} s")

        start = time.monotonic()
        low = detect(server.stub, src, threshold=0.3)
        print(f"Detect under qemu in {time.monotonic() - start:.1f} s: {len(low)} detections")
        assert low, "no detection above 0.3 from a head whose random scores spread around 0.5"
        assert_well_formed(low, 0.3)

        # A threshold between the scores found: the same boxes, only those scoring above it.
        scores = sorted(d.confidence for d in low)
        high_threshold = scores[len(scores) // 2]
        high = detect(server.stub, src, threshold=high_threshold)
        assert_well_formed(high, high_threshold)
        assert 0 < len(high) < len(low)
        assert sorted(map(key, high)) == sorted(key(d) for d in low if d.confidence > high_threshold)
        assert_healthy(server.stub)
    finally:
        server.stop()
