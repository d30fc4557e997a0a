"""Our libllama.so against upstream llama.cpp's own default build (issue 45 item 1): prompt
processing and generation tokens/s on the same GGUF, threads and token counts.

  ./pants package engines/llama-cpp:avx512                       # or the level this CPU runs
  # upstream's default CMake (OpenMP on, GGML_NATIVE on, the host's gcc), by hand, from the SAME
  # pinned archive (3rdparty/native:llama-cpp-python-sdist); never part of the build graph:
  tar xzf llama_cpp_python-0.3.36.tar.gz && cd llama_cpp_python-0.3.36/vendor/llama.cpp
  cmake -B /tmp/anchor -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
  cmake --build /tmp/anchor --target llama-bench llama-quantize -j 2
  python3.11 bench/llama_anchor.py --library dist/engines/llama-cpp/avx512/libllama.so \\
      --llama-bench /tmp/anchor/bin/llama-bench --model /tmp/m.gguf [--threads 1 2] [--repeat 3]

Both sides do what llama-bench does: a warm-up decode, then `pp` tokens in one batch (prompt
processing) and, separately from an empty KV cache, `tg` tokens one at a time (generation), the
token ids fixed, no sampling. Ours runs in this process through backends/llama-cpp/binding.py
(the backend's own ctypes binding); upstream's is its llama-bench (`-o json`, one repetition per
call). Each repeat runs ours then upstream's back to back, so load changes fall on both alike.
Prints a Markdown table: medians of the repeats, and the ratio ours / upstream.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "backends" / "llama-cpp"))
import binding  # noqa: E402 (the backend's own binding, not a copy)


def ours(model: "binding.Model", threads: int, pp: int, tg: int) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s) of one run, as llama-bench measures them."""
    ctx = model.context(n_ctx=pp + tg + 16, n_batch=max(pp, 1), n_seq_max=1, threads=threads)
    try:
        ctx.decode([(1, 0, 0, True)])  # warm-up, as llama-bench's
        ctx.clear()
        start = time.perf_counter()
        ctx.decode([(1 + i % 100, i, 0, i == pp - 1) for i in range(pp)])
        pp_ts = pp / (time.perf_counter() - start)
        ctx.clear()
        start = time.perf_counter()
        for i in range(tg):
            ctx.decode([(1 + i % 100, i, 0, True)])
        return pp_ts, tg / (time.perf_counter() - start)
    finally:
        ctx.close()


def upstream(llama_bench: Path, gguf: Path, threads: int, pp: int, tg: int) -> tuple[float, float]:
    out = []
    for p, n in ((pp, 0), (0, tg)):
        proc = subprocess.run([str(llama_bench), "-m", str(gguf), "-t", str(threads), "-p", str(p), "-n", str(n),
                               "-r", "1", "-o", "json"], capture_output=True, text=True, check=True)
        (result,) = json.loads(proc.stdout)
        out.append(result["avg_ts"])
    return out[0], out[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--library", type=Path, required=True, help="our libllama.so (dist/engines/llama-cpp/<level>/)")
    p.add_argument("--llama-bench", type=Path, required=True, help="upstream's llama-bench, built by hand")
    p.add_argument("--model", type=Path, required=True, help="a GGUF both load")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--pp", type=int, default=128)
    p.add_argument("--tg", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    for path in (a.library, a.llama_bench, a.model):
        if not path.exists():
            raise SystemExit(f"{path}: no such file")
    model = binding.Library(str(a.library)).load_model(str(a.model))
    print(f"| model | threads | pp{a.pp} ours | pp{a.pp} upstream | ratio | tg{a.tg} ours | tg{a.tg} upstream | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for threads in a.threads:
        runs = [(ours(model, threads, a.pp, a.tg), upstream(a.llama_bench, a.model, threads, a.pp, a.tg)) for _ in range(a.repeat)]
        med = [statistics.median(r[side][kind] for r in runs) for side in (0, 1) for kind in (0, 1)]
        ratio = [statistics.median(r[0][kind] / r[1][kind] for r in runs) for kind in (0, 1)]
        print(f"| {a.model.name} | {threads} | {med[0]:.1f} | {med[2]:.1f} | {ratio[0]:.2f} | {med[1]:.1f} | {med[3]:.1f} | {ratio[1]:.2f} |")
        print("  runs (pp ours/upstream, tg ours/upstream): " + "; ".join(
            f"{o[0]:.1f}/{u[0]:.1f}, {o[1]:.1f}/{u[1]:.1f}" for o, u in runs), file=sys.stderr)
    model.close()


if __name__ == "__main__":
    main()
