"""ctypes binding of stable-diffusion.cpp's C API (include/stable-diffusion.h of the pinned
stable-diffusion-cpp-python 0.4.7 sdist), standard library only (and backends.common's ctypes
loader).

The parameter structs are declared field for field from the pinned header and filled by the
library's own *_init functions; `Library.check_abi()` compares what those functions set against
the values its source sets (src/stable-diffusion.cpp) at fields spread over each struct, and
checks that they write nothing past the declared size, so a header that drifted from these
declarations fails at load time instead of corrupting parameters.

Used by backends/stablediffusion-ggml (its own module) and bench/sd_cpp_generate.py (loaded by
path).
"""
from __future__ import annotations

import collections
import ctypes
import json
import math
import os
import struct
import threading

from backends.common.native_library import load_library

c_bool, c_int, c_float, c_char_p, c_void_p, c_size_t, c_uint32, c_int64 = (
    ctypes.c_bool, ctypes.c_int, ctypes.c_float, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
    ctypes.c_uint32, ctypes.c_int64)
c_enum = ctypes.c_int

SD_TYPE_COUNT = 41
SAMPLE_METHOD_COUNT = 15
SCHEDULER_COUNT = 11
RNG_TYPE_COUNT = 3
PREDICTION_COUNT = 6
CUDA_RNG = 1


class CtxParams(ctypes.Structure):
    _fields_ = [
        ("model_path", c_char_p), ("clip_l_path", c_char_p), ("clip_g_path", c_char_p),
        ("clip_vision_path", c_char_p), ("t5xxl_path", c_char_p), ("llm_path", c_char_p),
        ("llm_vision_path", c_char_p), ("diffusion_model_path", c_char_p),
        ("high_noise_diffusion_model_path", c_char_p), ("vae_path", c_char_p), ("taesd_path", c_char_p),
        ("control_net_path", c_char_p), ("embeddings", c_void_p), ("embedding_count", c_uint32),
        ("photo_maker_path", c_char_p), ("tensor_type_rules", c_char_p),
        ("vae_decode_only", c_bool), ("free_params_immediately", c_bool), ("n_threads", c_int),
        ("wtype", c_enum), ("rng_type", c_enum), ("sampler_rng_type", c_enum), ("prediction", c_enum),
        ("lora_apply_mode", c_enum),
        ("offload_params_to_cpu", c_bool), ("enable_mmap", c_bool), ("keep_clip_on_cpu", c_bool),
        ("keep_control_net_on_cpu", c_bool), ("keep_vae_on_cpu", c_bool), ("flash_attn", c_bool),
        ("diffusion_flash_attn", c_bool), ("tae_preview_only", c_bool), ("diffusion_conv_direct", c_bool),
        ("vae_conv_direct", c_bool), ("circular_x", c_bool), ("circular_y", c_bool),
        ("force_sdxl_vae_conv_scale", c_bool), ("chroma_use_dit_mask", c_bool), ("chroma_use_t5_mask", c_bool),
        ("chroma_t5_mask_pad", c_int), ("qwen_image_zero_cond_t", c_bool), ("max_vram", c_float),
    ]


class Image(ctypes.Structure):
    _fields_ = [("width", c_uint32), ("height", c_uint32), ("channel", c_uint32), ("data", ctypes.POINTER(ctypes.c_uint8))]


class SlgParams(ctypes.Structure):
    _fields_ = [("layers", c_void_p), ("layer_count", c_size_t), ("layer_start", c_float), ("layer_end", c_float),
                ("scale", c_float)]


class GuidanceParams(ctypes.Structure):
    _fields_ = [("txt_cfg", c_float), ("img_cfg", c_float), ("distilled_guidance", c_float), ("slg", SlgParams)]


class SampleParams(ctypes.Structure):
    _fields_ = [("guidance", GuidanceParams), ("scheduler", c_enum), ("sample_method", c_enum),
                ("sample_steps", c_int), ("eta", c_float), ("shifted_timestep", c_int),
                ("custom_sigmas", c_void_p), ("custom_sigmas_count", c_int), ("flow_shift", c_float)]


class PmParams(ctypes.Structure):
    _fields_ = [("id_images", c_void_p), ("id_images_count", c_int), ("id_embed_path", c_char_p),
                ("style_strength", c_float)]


class TilingParams(ctypes.Structure):
    _fields_ = [("enabled", c_bool), ("tile_size_x", c_int), ("tile_size_y", c_int), ("target_overlap", c_float),
                ("rel_size_x", c_float), ("rel_size_y", c_float)]


class CacheParams(ctypes.Structure):
    _fields_ = [
        ("mode", c_enum), ("reuse_threshold", c_float), ("start_percent", c_float), ("end_percent", c_float),
        ("error_decay_rate", c_float), ("use_relative_threshold", c_bool), ("reset_error_on_compute", c_bool),
        ("Fn_compute_blocks", c_int), ("Bn_compute_blocks", c_int), ("residual_diff_threshold", c_float),
        ("max_warmup_steps", c_int), ("max_cached_steps", c_int), ("max_continuous_cached_steps", c_int),
        ("taylorseer_n_derivatives", c_int), ("taylorseer_skip_interval", c_int), ("scm_mask", c_char_p),
        ("scm_policy_dynamic", c_bool), ("spectrum_w", c_float), ("spectrum_m", c_int), ("spectrum_lam", c_float),
        ("spectrum_window_size", c_int), ("spectrum_flex_window", c_float), ("spectrum_warmup_steps", c_int),
        ("spectrum_stop_percent", c_float),
    ]


class HiresParams(ctypes.Structure):
    _fields_ = [("enabled", c_bool), ("upscaler", c_enum), ("model_path", c_char_p), ("scale", c_float),
                ("target_width", c_int), ("target_height", c_int), ("steps", c_int),
                ("denoising_strength", c_float), ("upscale_tile_size", c_int)]


class ImgGenParams(ctypes.Structure):
    _fields_ = [
        ("loras", c_void_p), ("lora_count", c_uint32), ("prompt", c_char_p), ("negative_prompt", c_char_p),
        ("clip_skip", c_int), ("init_image", Image), ("ref_images", c_void_p), ("ref_images_count", c_int),
        ("auto_resize_ref_image", c_bool), ("increase_ref_index", c_bool), ("mask_image", Image),
        ("width", c_int), ("height", c_int), ("sample_params", SampleParams), ("strength", c_float),
        ("seed", c_int64), ("batch_count", c_int), ("control_image", Image), ("control_strength", c_float),
        ("pm_params", PmParams), ("vae_tiling_params", TilingParams), ("cache", CacheParams),
        ("hires", HiresParams),
    ]


_LOG_CALLBACK = ctypes.CFUNCTYPE(None, c_enum, c_char_p, c_void_p)
SD_LOG_WARN, SD_LOG_ERROR = 2, 3

_SIGNATURES = {
    "sd_set_log_callback": ([_LOG_CALLBACK, c_void_p], None),
    "sd_ctx_params_init": ([ctypes.POINTER(CtxParams)], None),
    "sd_img_gen_params_init": ([ctypes.POINTER(ImgGenParams)], None),
    "new_sd_ctx": ([ctypes.POINTER(CtxParams)], c_void_p),
    "free_sd_ctx": ([c_void_p], None),
    "sd_ctx_supports_image_generation": ([c_void_p], c_bool),
    "generate_image": ([c_void_p, ctypes.POINTER(ImgGenParams)], ctypes.POINTER(Image)),
    "str_to_sample_method": ([c_char_p], c_enum),
    "sd_sample_method_name": ([c_enum], c_char_p),
    "str_to_scheduler": ([c_char_p], c_enum),
    "sd_scheduler_name": ([c_enum], c_char_p),
    "str_to_rng_type": ([c_char_p], c_enum),
}


class SDError(Exception):
    pass


def check_safetensors(path: str) -> None:
    """Refuses a safetensors file whose header stable-diffusion.cpp would read with the wrong JSON
    types: its reader (src/model_io/safetensors_io.cpp) indexes the header without type checks,
    and nlohmann::json's type_error is uncaught there: the process aborts. Files that do not look
    like safetensors (sd.cpp's own test: header length < file size, header parses as JSON) are left
    to stable-diffusion.cpp, whose other readers fail cleanly."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return
            (n,) = struct.unpack("<Q", head)
            if not 2 < n < size:
                return
            header = json.loads(f.read(n).split(b"\0", 1)[0])
    except (OSError, ValueError):
        return
    if not isinstance(header, dict):
        raise SDError(f"{path}: safetensors header is not a JSON object")
    for name, info in header.items():
        if name == "__metadata__":
            continue
        ok = (isinstance(info, dict) and isinstance(info.get("dtype"), str)
              and isinstance(info.get("shape"), list) and len(info["shape"]) <= 5
              and all(isinstance(d, int) and d >= 0 for d in info["shape"])
              and isinstance(info.get("data_offsets"), list) and len(info["data_offsets"]) == 2
              and all(isinstance(o, int) and o >= 0 for o in info["data_offsets"])
              and info["data_offsets"][0] <= info["data_offsets"][1] <= size - 8 - n)
        if not ok:
            raise SDError(f"{path}: safetensors entry {name!r} is not {{dtype: str, shape: [<=5 ints], "
                          f"data_offsets: [begin, end] inside the file}}: {str(info)[:200]}")


def _names(func, count: int) -> list[str]:
    return [func(i).decode() for i in range(count)]


class Library:
    """One loaded libstable-diffusion.so. stable-diffusion.cpp keeps its log callback and a few
    settings global, so generations are serialized per library (`lock`)."""

    def __init__(self, path, verbose: bool = False):
        self.path = str(path)
        self.lib = load_library(self.path, _SIGNATURES, "stable-diffusion.cpp")
        self._libc = ctypes.CDLL(None)
        self._libc.free.argtypes, self._libc.free.restype = [c_void_p], None
        self.lock = threading.Lock()
        self._errors: collections.deque[str] = collections.deque(maxlen=20)

        def log(level, text, _data):
            msg = (text or b"").decode(errors="replace").rstrip()
            if level >= SD_LOG_WARN:
                self._errors.append(msg)
            if verbose or level >= SD_LOG_ERROR:
                print(msg, flush=True)

        self._log_cb = _LOG_CALLBACK(log)  # kept alive as long as the library
        self.lib.sd_set_log_callback(self._log_cb, None)
        self.check_abi()
        self.sample_methods = _names(self.lib.sd_sample_method_name, SAMPLE_METHOD_COUNT)
        self.schedulers = _names(self.lib.sd_scheduler_name, SCHEDULER_COUNT)

    @staticmethod
    def _init_checked(init, struct_type):
        """Runs init on a struct followed by guard bytes; the guard must be untouched."""
        guard = 256
        buf = ctypes.create_string_buffer(b"\xa5" * (ctypes.sizeof(struct_type) + guard))
        init(ctypes.cast(buf, ctypes.POINTER(struct_type)))
        if buf.raw[ctypes.sizeof(struct_type):ctypes.sizeof(struct_type) + guard] != b"\xa5" * guard:
            raise SDError(f"{struct_type.__name__}: the library writes past the declared struct: binding.py does "
                          "not match this stable-diffusion.h")
        return struct_type.from_buffer_copy(buf.raw[:ctypes.sizeof(struct_type)])

    def check_abi(self) -> None:
        ctx = self._init_checked(self.lib.sd_ctx_params_init, CtxParams)
        img = self._init_checked(self.lib.sd_img_gen_params_init, ImgGenParams)
        sp, cache, hires = img.sample_params, img.cache, img.hires
        got = {
            "ctx.wtype": ctx.wtype, "ctx.rng_type": ctx.rng_type, "ctx.sampler_rng_type": ctx.sampler_rng_type,
            "ctx.prediction": ctx.prediction, "ctx.free_params_immediately": ctx.free_params_immediately,
            "ctx.chroma_use_dit_mask": ctx.chroma_use_dit_mask, "ctx.chroma_t5_mask_pad": ctx.chroma_t5_mask_pad,
            "img.clip_skip": img.clip_skip, "img.width": img.width, "img.height": img.height,
            "img.seed": img.seed, "img.batch_count": img.batch_count,
            "sample.txt_cfg": sp.guidance.txt_cfg, "sample.slg.layer_end": round(sp.guidance.slg.layer_end, 6),
            "sample.scheduler": sp.scheduler, "sample.sample_method": sp.sample_method,
            "sample.sample_steps": sp.sample_steps, "sample.flow_shift_inf": math.isinf(sp.flow_shift),
            "img.strength": round(img.strength, 6), "img.control_strength": round(img.control_strength, 6),
            "pm.style_strength": img.pm_params.style_strength, "tiling.target_overlap": img.vae_tiling_params.target_overlap,
            "cache.max_warmup_steps": cache.max_warmup_steps, "cache.spectrum_warmup_steps": cache.spectrum_warmup_steps,
            "cache.spectrum_stop_percent": round(cache.spectrum_stop_percent, 6),
            "hires.upscaler": hires.upscaler, "hires.scale": hires.scale, "hires.upscale_tile_size": hires.upscale_tile_size,
        }
        # The values src/stable-diffusion.cpp's *_params_init functions set.
        want = {
            "ctx.wtype": SD_TYPE_COUNT, "ctx.rng_type": CUDA_RNG, "ctx.sampler_rng_type": RNG_TYPE_COUNT,
            "ctx.prediction": PREDICTION_COUNT, "ctx.free_params_immediately": True,
            "ctx.chroma_use_dit_mask": True, "ctx.chroma_t5_mask_pad": 1,
            "img.clip_skip": -1, "img.width": 512, "img.height": 512, "img.seed": -1, "img.batch_count": 1,
            "sample.txt_cfg": 7.0, "sample.slg.layer_end": 0.2, "sample.scheduler": SCHEDULER_COUNT,
            "sample.sample_method": SAMPLE_METHOD_COUNT, "sample.sample_steps": 20, "sample.flow_shift_inf": True,
            "img.strength": 0.75, "img.control_strength": 0.9, "pm.style_strength": 20.0,
            "tiling.target_overlap": 0.5, "cache.max_warmup_steps": 8, "cache.spectrum_warmup_steps": 4,
            "cache.spectrum_stop_percent": 0.9, "hires.upscaler": 1, "hires.scale": 2.0, "hires.upscale_tile_size": 128,
        }
        bad = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        if bad:
            raise SDError(f"{self.path}: stable-diffusion.h does not match binding.py ({{field: (got, expected)}}: {bad})")

    def last_errors(self) -> str:
        return " | ".join(self._errors) or "no error logged"

    def sample_method(self, name: str) -> int:
        v = self.lib.str_to_sample_method(name.encode())
        if not 0 <= v < SAMPLE_METHOD_COUNT:
            raise ValueError(f"unknown sampler {name!r}: one of {self.sample_methods}")
        return v

    def scheduler(self, name: str) -> int:
        v = self.lib.str_to_scheduler(name.encode())
        if not 0 <= v < SCHEDULER_COUNT:
            raise ValueError(f"unknown scheduler {name!r}: one of {self.schedulers}")
        return v

    def load(self, model_path: str, n_threads: int = 0, paths: dict | None = None, rng: str = "",
             flags: dict | None = None) -> "Model":
        """new_sd_ctx for `model_path` (plus component paths: vae_path, taesd_path, clip_l_path, ...).
        Raises SDError with stable-diffusion.cpp's logged errors when it refuses the model."""
        for path in (model_path, *(paths or {}).values()):
            if path:
                check_safetensors(str(path))
        params = self._init_checked(self.lib.sd_ctx_params_init, CtxParams)
        keep = [model_path.encode()]
        params.model_path = keep[0]
        for field, value in (paths or {}).items():
            keep.append(str(value).encode())
            setattr(params, field, keep[-1])
        params.free_params_immediately = False  # the model serves many GenerateImage calls
        params.vae_decode_only = True
        if n_threads > 0:
            params.n_threads = n_threads
        if rng:
            v = self.lib.str_to_rng_type(rng.encode())
            if not 0 <= v < RNG_TYPE_COUNT:
                raise ValueError(f"unknown rng_type {rng!r}: one of std_default, cuda, cpu")
            params.rng_type = v
        for field, value in (flags or {}).items():
            setattr(params, field, value)
        with self.lock:
            self._errors.clear()
            ctx = self.lib.new_sd_ctx(ctypes.byref(params))
            if not ctx:
                raise SDError(f"stable-diffusion.cpp could not load {model_path}: {self.last_errors()}")
            if not self.lib.sd_ctx_supports_image_generation(ctx):
                self.lib.free_sd_ctx(ctx)
                raise SDError(f"{model_path} is not an image generation model")
        return Model(self, ctx)


class Model:
    def __init__(self, library: Library, ctx: int):
        self.library, self.ctx = library, ctx

    def generate(self, prompt: str, negative_prompt: str = "", width: int = 512, height: int = 512, steps: int = 20,
                 seed: int = 42, cfg_scale: float = 0.0, sample_method: int | None = None,
                 scheduler: int | None = None, clip_skip: int = -1) -> tuple[int, int, int, bytes]:
        """One image: (width, height, channels, pixel bytes, row-major, 8 bits per channel)."""
        lib = self.library
        p = lib._init_checked(lib.lib.sd_img_gen_params_init, ImgGenParams)
        keep = (prompt.encode(), negative_prompt.encode())
        p.prompt, p.negative_prompt = keep
        p.width, p.height, p.seed, p.batch_count, p.clip_skip = width, height, seed, 1, clip_skip
        p.sample_params.sample_steps = steps
        if cfg_scale > 0:
            p.sample_params.guidance.txt_cfg = cfg_scale
        if sample_method is not None:
            p.sample_params.sample_method = sample_method
        if scheduler is not None:
            p.sample_params.scheduler = scheduler
        with lib.lock:
            lib._errors.clear()
            images = lib.lib.generate_image(self.ctx, ctypes.byref(p))
            if not images:
                raise SDError(f"generation failed: {lib.last_errors()}")
            img = images[0]
            try:
                if not img.data:
                    raise SDError(f"generation returned no pixels: {lib.last_errors()}")
                data = ctypes.string_at(img.data, img.width * img.height * img.channel)
                return img.width, img.height, img.channel, data
            finally:
                if img.data:
                    lib._libc.free(ctypes.cast(img.data, c_void_p))
                lib._libc.free(ctypes.cast(images, c_void_p))

    def close(self) -> None:
        if self.ctx:
            self.library.lib.free_sd_ctx(self.ctx)
            self.ctx = 0
