"""LocalAI stablediffusion-ggml backend on stable-diffusion.cpp (engines/stable-diffusion-cpp, C++
on ggml): GenerateImage (text to image) from a PEX with no torch, numpy or Pillow.

The PEX carries one libstable-diffusion.so per CPU level (fallback, avx2, avx512); the best one
this CPU supports is loaded with ctypes (binding.py), as LocalAI's run.sh picks one from
/proc/cpuinfo. The image is written as PNG with the standard library (png.py).

LoadModel: `Model` is a checkpoint stable-diffusion.cpp reads (.safetensors, .ckpt, .gguf);
`Options` as LocalAI's backend reads them ("name:value"): sampler, scheduler, rng_type,
n_threads, component paths (vae_path, taesd_path, clip_l_path, clip_g_path, t5xxl_path, llm_path,
diffusion_model_path, control_net_path: relative to ModelPath, which they must stay inside), the
bare flag `diffusion_model` (Model is a diffusion model file, not a full checkpoint) and
boolean flags (diffusion_flash_attn, ...). `CFGScale` is the guidance scale (0: the library's).
"""
from __future__ import annotations

import os

from backends.common.engine import EngineServicer, PackagedLibrary
from backends.common.errors import FailedPrecondition, InvalidArgument, NotFound, require
from backends.common.model_files import check_file
from backends.common.paths import model_file
from backends.common.server import run
from backends.proto import backend_pb2

from . import png
from .binding import Library, SDError

ENGINE_DIR = "engines/stable-diffusion-cpp"
LIBRARY = "libstable-diffusion.so"
MAX_SIDE = 2048  # per side; memory grows with the square of it on CPU
SIDE_MULTIPLE = 8  # the autoencoder's scale factor
MAX_STEPS = 150
DEFAULT_STEPS = 20
PATH_OPTIONS = ("vae_path", "taesd_path", "clip_l_path", "clip_g_path", "t5xxl_path", "llm_path",
                "diffusion_model_path", "control_net_path", "clip_vision_path")
FLAG_OPTIONS = ("diffusion_flash_attn", "vae_conv_direct", "diffusion_conv_direct", "keep_clip_on_cpu",
                "keep_vae_on_cpu", "keep_control_net_on_cpu", "offload_params_to_cpu", "enable_mmap")


class Engine(PackagedLibrary, Library):
    """The best libstable-diffusion.so of this PEX for this CPU, extracted to a real file for ctypes."""

    engine_dir, library, override_env = ENGINE_DIR, LIBRARY, "LOCALAI_SD_CPU"

    def __init__(self):
        super().__init__(__package__, verbose=bool(os.environ.get("LOCALAI_SD_VERBOSE")))


def parse_options(options, model_dir: str) -> dict:
    """LocalAI's "name:value" options -> {sampler, scheduler, rng, threads, paths, flags, diffusion_model}."""
    out = {"sampler": "", "scheduler": "", "rng": "", "threads": 0, "paths": {}, "flags": {},
           "diffusion_model": False}
    for op in options:
        name, has_value, value = op.partition(":")
        if name == "diffusion_model" and not has_value:
            out["diffusion_model"] = True
        elif name in ("sampler", "scheduler"):
            out[name] = value
        elif name == "rng_type":
            out["rng"] = value
        elif name == "n_threads":
            require(value.isdigit(), f"option n_threads:{value}: expected a non-negative integer")
            out["threads"] = int(value)
        elif name in PATH_OPTIONS:
            root = os.path.realpath(model_dir or ".")
            path = os.path.realpath(os.path.join(root, value))
            require(bool(value) and os.path.commonpath([root, path]) == root,
                    f"option {name}:{value}: must name a file inside the models directory {root}")
            if not os.path.isfile(path):
                raise NotFound(f"option {name}: file not found: {path}")
            out["paths"][name] = path
        elif name in FLAG_OPTIONS:
            require(value in ("", "true", "1", "false", "0"), f"option {name}:{value}: expected true/false/1/0")
            out["flags"][name] = value in ("", "true", "1")
        # Other options belong to features this backend does not serve (LoRA, video, ...): ignored,
        # as LocalAI's backend ignores names it does not know.
    return out


def validate_image_request(request) -> None:
    require(bool(request.positive_prompt), "positive_prompt is empty")
    require(bool(request.dst), "dst (the output PNG path) is empty")
    for name in ("width", "height"):
        v = getattr(request, name)
        require(SIDE_MULTIPLE <= v <= MAX_SIDE and v % SIDE_MULTIPLE == 0,
                f"{name} must be a multiple of {SIDE_MULTIPLE} in {SIDE_MULTIPLE}..{MAX_SIDE}, got {v}")
    require(0 <= request.step <= MAX_STEPS, f"step must be in 0..{MAX_STEPS} (0: {DEFAULT_STEPS}), got {request.step}")
    require(request.CLIPSkip >= 0, f"CLIPSkip must be >= 0, got {request.CLIPSkip}")
    require(not request.src and not request.ref_images,
            "src/ref_images (img2img, edit) are not served by this backend yet: send a text-to-image request")
    parent = os.path.dirname(os.path.abspath(request.dst))
    if not os.path.isdir(parent):
        raise NotFound(f"output directory does not exist: {parent}")


class Loaded:
    def __init__(self, model, cfg_scale: float, sample_method, scheduler):
        self.model, self.cfg_scale, self.sample_method, self.scheduler = model, cfg_scale, sample_method, scheduler

    def close(self) -> None:
        self.model.close()


class StableDiffusionServicer(EngineServicer):
    def new_engine(self):
        return Engine()

    def load(self, request, path):
        path = model_file(path, (".safetensors", ".gguf", ".ckpt"), "Stable Diffusion checkpoint")
        opts = parse_options(request.Options, request.ModelPath or os.path.dirname(path))
        try:
            sample_method = self.engine.sample_method(opts["sampler"]) if opts["sampler"] else None
            scheduler = self.engine.scheduler(opts["scheduler"]) if opts["scheduler"] else None
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        require(request.CFGScale >= 0, f"CFGScale must be >= 0, got {request.CFGScale}")
        paths = dict(opts["paths"])
        model_path = path
        if opts["diffusion_model"]:
            paths["diffusion_model_path"], model_path = path, ""
        threads = opts["threads"] or max(request.Threads, 0)
        # After the options, so a bad option is named whatever the file; before the engine.
        check_file(path, ("safetensors", "gguf", "zip", "pickle"), "a Stable Diffusion checkpoint (.safetensors, .ckpt or .gguf)")
        try:
            model = self.engine.load(model_path, n_threads=threads, paths=paths, rng=opts["rng"], flags=opts["flags"])
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        except SDError as e:
            raise InvalidArgument(f"{e} (a Stable Diffusion checkpoint stable-diffusion.cpp reads: .safetensors, "
                                  ".ckpt or .gguf)") from None
        return Loaded(model, request.CFGScale, sample_method, scheduler)

    def GenerateImage(self, request, context):
        validate_image_request(request)
        loaded: Loaded = self.require_model()
        w, h = request.width, request.height
        try:
            gw, gh, channels, pixels = loaded.model.generate(
                request.positive_prompt, request.negative_prompt, width=w, height=h,
                steps=request.step or DEFAULT_STEPS, seed=request.seed, cfg_scale=loaded.cfg_scale,
                sample_method=loaded.sample_method, scheduler=loaded.scheduler, clip_skip=request.CLIPSkip or -1)
        except SDError as e:
            # The request was validated and the model loaded: what fails here is the checkpoint
            # (tensors the sampler needs, a component it lacks), so the answer names it.
            raise FailedPrecondition(f"stable-diffusion.cpp could not generate with {self.model_path}: {e}; the checkpoint "
                                     "loaded but is not a complete Stable Diffusion model stable-diffusion.cpp runs") from None
        if (gw, gh) != (w, h):
            require(gw >= w and gh >= h, f"stable-diffusion.cpp returned {gw}x{gh} for a {w}x{h} request")
            pixels = png.center_crop(gw, gh, channels, pixels, w, h)
        with open(request.dst, "wb") as f:
            f.write(png.encode(w, h, channels, pixels))
        return backend_pb2.Result(success=True, message=f"image written to {request.dst}")


def main(argv=None):
    run(StableDiffusionServicer, argv)


if __name__ == "__main__":
    main()
