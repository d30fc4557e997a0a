"""stable-diffusion.cpp (engines/stable-diffusion-cpp through backends/stablediffusion-ggml's
binding): generation time and peak RSS at the test model's size, one child process per CPU level
this machine runs (load time, generation time, peak RSS of that process).

  ./pants package engines/stable-diffusion-cpp:fallback engines/stable-diffusion-cpp:avx2 \
      engines/stable-diffusion-cpp:avx512
  python bench/sd_cpp_generate.py --engines dist/engines/stable-diffusion-cpp --work /tmp/sdbench

Run from the repository root in an environment with numpy and safetensors (to make the random
SDXS-512-DS checkpoint of tests/integration/sd_cpp_models.py once; the children need only the
standard library). Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINDING = ROOT / "backends" / "stablediffusion-ggml" / "binding.py"

CHILD = r'''
import importlib.util, json, resource, sys, time
args = json.loads(sys.argv[1])
sys.path.insert(0, args["root"])  # the binding loads its library with backends.common.native_library
spec = importlib.util.spec_from_file_location("sd_binding", args["binding"])
binding = importlib.util.module_from_spec(spec); spec.loader.exec_module(binding)
t0 = time.perf_counter()
lib = binding.Library(args["lib"])
model = lib.load(args["model"], n_threads=args["threads"])
load = time.perf_counter() - t0
runs = []
for i in range(args["repeat"]):
    t0 = time.perf_counter()
    w, h, c, px = model.generate("a red cube", "blurry", width=args["size"], height=args["size"], steps=args["steps"],
                                 seed=42 + i, sample_method=lib.sample_method("euler"))
    runs.append(time.perf_counter() - t0)
print(json.dumps({"load": load, "runs": runs, "size": [w, h],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def cpu_levels_here() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from backends.common.cpu_levels import CPU_LEVELS, cpu_flags

    flags = cpu_flags()
    return [lvl for lvl in CPU_LEVELS if CPU_LEVELS[lvl] <= flags]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engines", default="dist/engines/stable-diffusion-cpp", help="<dir>/<level>/libstable-diffusion.so")
    p.add_argument("--work", required=True, help="where the random checkpoint is made (kept for re-runs)")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    model = Path(a.work) / "sdxs-random.safetensors"
    if not model.exists():
        sys.path.insert(0, str(ROOT))
        from tests.integration.sd_cpp_models import random_sdxs

        random_sdxs(model)
    print(f"load average {os.getloadavg()[0]:.2f}; {a.size}x{a.size}, {a.steps} step(s), euler, cfg 7 "
          f"(prompt + negative), {a.threads} threads, median of {a.repeat}", file=sys.stderr)
    print("| CPU level | load (s) | generate (s, median) | peak RSS (MB) |\n|---|---|---|---|")
    for level in reversed(cpu_levels_here()):
        lib = Path(a.engines) / level / "libstable-diffusion.so"
        if not lib.exists():
            print(f"| {level} | (no {lib}) | | |")
            continue
        args = {"root": str(ROOT), "binding": str(BINDING), "lib": str(lib), "model": str(model), "threads": a.threads,
                "size": a.size, "steps": a.steps, "repeat": a.repeat}
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], check=True, capture_output=True,
                             text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        runs = sorted(r["runs"])
        print(f"| {level} | {r['load']:.2f} | {runs[len(runs) // 2]:.2f} | {r['rss_mb']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
