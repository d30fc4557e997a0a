"""LocalAI diffusers backend: GenerateImage (text-to-image, img2img with ``src``).

float32 on CPU always (float16/bfloat16 deadlock diffusers on CPU, LocalAI #5990); on GPUs
the dtype comes from backends.common.device.
"""

import os

from backends.common.device import select_device_and_dtype
from backends.common.errors import FailedPrecondition, InvalidArgument, NotFound, require
from backends.common.model_files import check_model
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

MAX_SIDE = 4096
DEFAULT_STEPS = 25
EXPECTS = ("a diffusers pipeline folder (model_index.json and its components) or a single-file checkpoint "
           "(.safetensors, .ckpt, .gguf)")
SINGLE_FILE_FORMATS = ("safetensors", "zip", "pickle", "gguf")


def parse_options(options) -> dict:
    """LocalAI's ``ModelOptions.Options``: "key:value" strings (others ignored)."""
    return dict((k.strip(), v.strip()) for k, v in (o.split(":", 1) for o in options if ":" in o))


def pipeline_class_name(request, single_file: bool) -> str:
    """The diffusers class LoadModel calls. As in LocalAI, ``PipelineType`` names it. Without one a
    folder loads through AutoPipelineFor{Text2Image,Image2Image} (model_index.json names the
    pipeline), but the Auto classes have no ``from_single_file``: a single file loads through
    StableDiffusion(Img2Img)Pipeline, LocalAI's own img2img default."""
    if request.PipelineType:
        return request.PipelineType
    if single_file:
        return "StableDiffusionImg2ImgPipeline" if request.IMG2IMG else "StableDiffusionPipeline"
    return "AutoPipelineForImage2Image" if request.IMG2IMG else "AutoPipelineForText2Image"


def single_file_config(request, path: str):
    """The diffusers folder whose configs describe a single-file checkpoint (option
    ``config:<folder>``, relative to ModelPath): without it diffusers fetches them from the Hub."""
    given = parse_options(request.Options).get("config", "")
    if not given:
        return None
    folder = given if os.path.isabs(given) else os.path.join(request.ModelPath or os.path.dirname(path), given)
    check_model(folder, "a diffusers pipeline folder (model_index.json and component configs) for option config",
                directory=True, required=["model_index.json"])
    return folder


def load_single_file(cls, path: str, config, kwargs):
    if not hasattr(cls, "from_single_file"):
        raise InvalidArgument(f"{cls.__name__} cannot load the single-file checkpoint {path}: set PipelineType to a "
                              "concrete pipeline, e.g. StableDiffusionPipeline or StableDiffusionXLPipeline")
    if config is None:
        try:
            return cls.from_single_file(path, **kwargs)
        except Exception as exc:  # offline: the Hub lookup of the checkpoint's configs fails
            raise FailedPrecondition(
                f"cannot load {path} with {cls.__name__}.from_single_file: {type(exc).__name__}: {exc}; diffusers "
                "needs the configs of the checkpoint's pipeline: name a diffusers folder of the same model type with "
                "the option config:<folder>, or load it once online") from exc
    return cls.from_single_file(path, config=config, **kwargs)


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
    model_expects = EXPECTS

    def load(self, request, path):
        if os.path.exists(path):  # else a hub id (online only: resolve_model_path)
            check_model(path, EXPECTS, file_formats=SINGLE_FILE_FORMATS, directory=True, required=["model_index.json"])
        import torch

        import diffusers

        device, dtype = select_device_and_dtype(torch, request.DType or None)
        kwargs = {"torch_dtype": dtype}
        single_file = os.path.isfile(path)
        pipeline_type = pipeline_class_name(request, single_file)
        cls = getattr(diffusers, pipeline_type, None)
        if cls is None:
            raise InvalidArgument(f"unknown PipelineType {pipeline_type!r}: not a diffusers class")
        if single_file:
            pipe = load_single_file(cls, path, single_file_config(request, path), kwargs)
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
