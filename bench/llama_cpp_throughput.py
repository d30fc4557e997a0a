"""Generation throughput of backends/llama-cpp:cpu (continuous batching) against
backends/transformers:cpu, both packaged folders started as LocalAI starts them and called over
gRPC, and optionally llama.cpp's own llama-server on the same GGUF: tokens/s at each concurrency,
time to first token, load time and peak RSS (Status' max_rss; /proc for llama-server).

  ./pants package backends/llama-cpp:cpu backends/transformers:cpu
  ./pants export --resolve=tests     # a venv with the tests resolve: dist/export/python/virtualenvs/tests/*
  $VENV/bin/python bench/llama_cpp_throughput.py --work /tmp/llbench --sdist llama_cpp_python-0.3.36.tar.gz \
      [--llama-server PATH]

Run from the repository root with the tests resolve's packages (torch, transformers, tokenizers,
sentencepiece, grpcio, grpcio-tools: the gRPC stubs are compiled from backends/proto/backend.proto
by bench/backend_client.py when they are not generated): the random Llama (~100M parameters by default) is made once in --work with
tests/integration/llama_cpp_models.py and converted with the pinned archive's converter (f32, the
weights transformers runs). Every request asks for --tokens greedy tokens with EOS ignored, so all
engines generate the same amount. Prints a Markdown table (medians of --repeat runs).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from backend_client import Backend, free_port, pb2  # noqa: E402 (stubs compiled if not generated)


def grpc_request(stub, prompt: str, tokens: int):
    """(seconds to the first text, tokens generated) of one greedy PredictStream, EOS ignored."""
    start, first, n = time.perf_counter(), None, 0
    for r in stub.PredictStream(pb2.PredictOptions(Prompt=prompt, Tokens=tokens, Temperature=0, IgnoreEOS=True),
                                timeout=3600):
        if r.message and first is None:
            first = time.perf_counter() - start
        n = max(n, r.tokens)
    return first or 0.0, n


def server_request(port: int, prompt: str, tokens: int):
    """The same request to llama-server's /completion, streamed (server-sent events) so that the
    time to the first token is measured at the client as for the gRPC backends."""
    body = json.dumps({"prompt": prompt, "n_predict": tokens, "temperature": 0, "ignore_eos": True,
                       "cache_prompt": False, "stream": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", body, {"Content-Type": "application/json"})
    start, first, chunks, predicted = time.perf_counter(), None, 0, 0
    with urllib.request.urlopen(req, timeout=3600) as resp:
        for line in resp:
            if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                continue
            event = json.loads(line[len(b"data: "):])
            if event.get("content"):
                chunks += 1
                if first is None:
                    first = time.perf_counter() - start
            predicted = max(predicted, int(event.get("tokens_predicted", 0)))
    return first or 0.0, predicted or chunks


def concurrent(call, c: int):
    results, threads = [None] * c, []
    start = time.perf_counter()
    for i in range(c):
        t = threading.Thread(target=lambda i=i: results.__setitem__(i, call(i)))
        threads.append(t)
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return sum(r[1] for r in results) / wall, statistics.median(r[0] for r in results)


class Engine:
    """A started, loaded engine: `call(i)` sends request i, `rss()` is its peak RSS in MB."""

    def __init__(self, name: str, call, rss, load: float, stop):
        self.name, self.call, self.rss, self.load, self.stop = name, call, rss, load, stop
        self.runs: dict[int, list] = {}


def interleaved(engines, concurrency, repeat: int) -> None:
    """Repeat r of concurrency c runs every engine back to back, so that the machine's load (shared,
    changing) falls on all of them alike; medians over the repeats."""
    for e in engines:
        e.call(0)  # warm-up: first-call costs (allocations, page faults of the weights) are not throughput
    for c in concurrency:
        for _ in range(repeat):
            for e in engines:
                e.runs.setdefault(c, []).append(concurrent(e.call, c))
        for e in engines:
            print(f"{e.name} c={c}: tokens/s {[round(r[0], 1) for r in e.runs[c]]} load {os.getloadavg()[0]:.1f}",
                  file=sys.stderr)


def serve_llama_server(exe: Path, gguf: Path, ctx_per_seq: int, parallel: int, threads: int, log: Path):
    port = free_port()
    srv = subprocess.Popen([str(exe), "-m", str(gguf), "--port", str(port), "-c", str(ctx_per_seq * parallel),
                            "-np", str(parallel), "-t", str(threads), "-tb", str(threads)],
                           stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    t0 = time.perf_counter()
    while True:
        if srv.poll() is not None:
            raise SystemExit(f"llama-server exited with {srv.returncode}: see {log}")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                return srv, port, time.perf_counter() - t0
        except Exception:  # noqa: BLE001 (503 while loading, refused before listening)
            time.sleep(0.05)


def vm_hwm_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dist", type=Path, default=ROOT / "dist")
    p.add_argument("--work", type=Path, required=True, help="holds the random model (made once) and logs")
    p.add_argument("--sdist", type=Path, default=ROOT / "3rdparty/native/llama_cpp_python-0.3.36.tar.gz",
                   help="the pinned llama_cpp_python 0.3.36 sdist (its converter makes the GGUF)")
    p.add_argument("--llama-server", type=Path, help="llama-server built by hand from the same archive")
    p.add_argument("--engines", nargs="+", default=["llama-cpp:cpu", "transformers:cpu", "llama-server"])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--llama-cpp-options", nargs="*", default=[], help="extra ModelOptions.Options (key:value)")
    a = p.parse_args()

    hf, gguf = a.work / "hf", a.work / "bench-llama-f32.gguf"
    if not gguf.exists():
        from tests.integration.llama_cpp_models import convert, make_model

        if not a.sdist.exists():
            raise SystemExit(f"{a.sdist}: no such file; pass --sdist with the llama_cpp_python 0.3.36 sdist")
        model, _ = make_model(hf, hidden=a.hidden, layers=a.layers, heads=12, kv_heads=12, context=1024)
        print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters", file=sys.stderr)
        del model
        convert(hf, gguf, sdist=a.sdist)
    prompts = [f"once upon a time there was a tiny random network number {i}" for i in range(max(a.concurrency))]
    top, ctx = max(a.concurrency), 256
    grpc_engines = {
        "llama-cpp:cpu": ("llama-cpp", pb2.ModelOptions(Model=str(gguf), ContextSize=ctx, Threads=a.threads,
                                                        Options=[f"parallel:{top}", *a.llama_cpp_options])),
        "transformers:cpu": ("transformers", pb2.ModelOptions(Model=str(hf), Threads=a.threads)),
    }
    engines = []
    try:
        for name in a.engines:
            if name == "llama-server":
                if not a.llama_server:
                    continue
                srv, port, load = serve_llama_server(a.llama_server, gguf, ctx, top, a.threads,
                                                     a.work / "llama-server.log")
                engines.append(Engine(name, lambda i, port=port: server_request(port, prompts[i], a.tokens),
                                      lambda pid=srv.pid: vm_hwm_mb(pid), load,
                                      lambda srv=srv: (srv.terminate(), srv.wait(60))))
                continue
            folder, options = grpc_engines[name]
            run_sh = a.dist / "backends" / folder / "cpu" / "run.sh"
            proc = Backend([str(run_sh)], {"PYTHON_GRPC_MAX_WORKERS": str(top)}, log=str(a.work / f"{folder}.log"))
            # proc.stub is read at call time: wait_healthy replaces the channel after a failed try.
            engines.append(Engine(name, lambda i, proc=proc: grpc_request(proc.stub, prompts[i], a.tokens),
                                  lambda proc=proc: proc.stub.Status(pb2.HealthMessage(), timeout=10)
                                  .memory.breakdown["max_rss"] / 2**20, 0.0, proc.stop))
            proc.wait_healthy()
            t0 = time.perf_counter()
            res = proc.stub.LoadModel(options, timeout=600)
            if not res.success:
                raise SystemExit(f"{name}: LoadModel failed: {res.message}")
            engines[-1].load = time.perf_counter() - t0
        print(f"load average before: {os.getloadavg()}", file=sys.stderr)
        interleaved(engines, a.concurrency, a.repeat)
        print(f"load average after: {os.getloadavg()}", file=sys.stderr)
        rss = {e.name: e.rss() for e in engines}
    finally:
        for e in engines:
            e.stop()
    print("| engine | concurrency | tokens/s (all requests) | runs | TTFT median (s) | load (s) | peak RSS (MB) |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for e in engines:
        for c in a.concurrency:
            runs = e.runs[c]
            print(f"| {e.name} | {c} | {statistics.median(r[0] for r in runs):.1f} | "
                  f"{', '.join(f'{r[0]:.1f}' for r in runs)} | {statistics.median(r[1] for r in runs):.3f} | "
                  f"{e.load:.2f} | {rss[e.name]:.0f} |")
    by_name = {e.name: e for e in engines}
    if "llama-cpp:cpu" in by_name and "llama-server" in by_name:
        ours, theirs = by_name["llama-cpp:cpu"], by_name["llama-server"]
        for c in a.concurrency:
            ratios = [x[0] / y[0] for x, y in zip(ours.runs[c], theirs.runs[c])]
            print(f"llama-cpp:cpu / llama-server at concurrency {c}: median of per-repeat ratios "
                  f"{statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
