"""LocalAI diffusers backend: GenerateImage (text-to-image, img2img with ``src``).

float32 on CPU always (float16/bfloat16 deadlock diffusers on CPU, LocalAI #5990); on GPUs
the dtype comes from backends.common.device.
"""

import os

from backends.common.device import select_device_and_dtype
from backends.common.errors import InvalidArgument, NotFound, require
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

MAX_SIDE = 4096
DEFAULT_STEPS = 25


def validate_image_request(request) -> None:
    require(bool(request.positive_prompt), "positive_prompt is empty")
    require(bool(request.dst), "dst (the output PNG path) is empty")
    for name in ("width", "height"):
        v = getattr(request, name)
        require(0 < v <= MAX_SIDE, f"{name} must be in 1..{MAX_SIDE}, got {v}")
        require(v % 8 == 0, f"{name} must be a multiple of 8, got {v}")
    require(request.step >= 0, f"step must be >= 0, got {request.step}")
    parent = os.path.dirname(os.path.abspath(request.dst))
    if not os.path.isdir(parent):
        raise NotFound(f"output directory does not exist: {parent}")
    if request.src and not os.path.isfile(request.src):
        raise NotFound(f"src image not found: {request.src}")


class DiffusersServicer(BaseServicer):
    def load(self, request, path):
        import torch

        import diffusers

        device, dtype = select_device_and_dtype(torch, request.DType or None)
        kwargs = {"torch_dtype": dtype}
        pipeline_type = request.PipelineType or ("AutoPipelineForImage2Image" if request.IMG2IMG else "AutoPipelineForText2Image")
        cls = getattr(diffusers, pipeline_type, None)
        if cls is None:
            raise InvalidArgument(f"unknown PipelineType {pipeline_type!r}: not a diffusers class")
        if os.path.isfile(path):
            pipe = cls.from_single_file(path, **kwargs)
        else:
            pipe = cls.from_pretrained(path, **kwargs)
        if request.SchedulerType:
            sched_cls = getattr(diffusers, request.SchedulerType, None)
            if sched_cls is None:
                raise InvalidArgument(f"unknown SchedulerType {request.SchedulerType!r}")
            pipe.scheduler = sched_cls.from_config(pipe.scheduler.config)
        pipe = pipe.to(device)
        if hasattr(pipe, "set_progress_bar_config"):
            pipe.set_progress_bar_config(disable=True)
        self.torch, self.device = torch, device
        self.cfg_scale = request.CFGScale or None
        self.img2img = request.IMG2IMG
        return pipe

    def GenerateImage(self, request, context):
        validate_image_request(request)
        pipe = self.require_model()
        kwargs = {
            "prompt": request.positive_prompt,
            "width": request.width,
            "height": request.height,
            "num_inference_steps": request.step or DEFAULT_STEPS,
        }
        if request.negative_prompt:
            kwargs["negative_prompt"] = request.negative_prompt
        if self.cfg_scale:
            kwargs["guidance_scale"] = self.cfg_scale
        if request.seed:
            kwargs["generator"] = self.torch.Generator(device="cpu").manual_seed(request.seed)
        if request.src:
            from PIL import Image

            kwargs["image"] = Image.open(request.src).convert("RGB")
            kwargs.pop("width"), kwargs.pop("height")
        with self.torch.inference_mode():
            image = pipe(**kwargs).images[0]
        if image.size != (request.width, request.height) and not request.src:
            image = image.resize((request.width, request.height))
        image.save(request.dst, format="PNG")
        return backend_pb2.Result(success=True, message=f"image written to {request.dst}")


def main(argv=None):
    run(DiffusersServicer, argv)


if __name__ == "__main__":
    main()
