"""Where stable-diffusion.cpp's time goes: its own timing log (text conditioning, sampling, VAE
decode) for each image, through backends/stablediffusion-ggml's binding with `verbose=True`, for
one library and one set of sd_ctx_params flags (e.g. flash attention, direct convolution).

  python bench/sd_cpp_phases.py --lib dist/engines/stable-diffusion-cpp/avx512/libstable-diffusion.so \\
      --ckpt /tmp/sdvs/sdxs-random.safetensors --size 256 [--flag diffusion_flash_attn --flag flash_attn]

The checkpoint is bench/sd_cpp_vs_diffusers.py's (made in its --work). Same request as that bench:
"a red cube", negative "blurry", 1 euler step, cfg 7. Prints one line per phase and image; the
first image pays graph allocation, so read the second.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASES = re.compile(r"(get_learned_condition|sampling|decode_first_stage) completed, taking ([0-9.]+)s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--images", type=int, default=2)
    p.add_argument("--flag", action="append", default=[], help="an sd_ctx_params bool field set to true")
    a = p.parse_args()
    sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location("sd_binding", ROOT / "backends" / "stablediffusion-ggml" / "binding.py")
    binding = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(binding)
    lib = binding.Library(a.lib, verbose=True)
    model = lib.load(a.ckpt, n_threads=a.threads, flags={f: True for f in a.flag})
    for i in range(a.images):
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            t0 = time.perf_counter()
            model.generate("a red cube", "blurry", width=a.size, height=a.size, steps=1, seed=42 + i, cfg_scale=7.0,
                           sample_method=lib.sample_method("euler"))
            total = time.perf_counter() - t0
        phases = ", ".join(f"{m.group(1)} {float(m.group(2)):.2f} s" for m in PHASES.finditer(log.getvalue()))
        print(f"image {i + 1} ({a.size}x{a.size}, flags {a.flag or 'none'}): {phases}; total {total:.2f} s", flush=True)


if __name__ == "__main__":
    main()
