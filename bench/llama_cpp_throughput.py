"""Generation throughput of backends/llama-cpp:cpu (continuous batching) against
backends/transformers:cpu, both packaged folders started as LocalAI starts them and called over
gRPC, and optionally llama.cpp's own llama-server on the same GGUF: tokens/s at each concurrency,
time to first token, load time and peak RSS (Status' max_rss; /proc for llama-server).

  ./pants package backends/llama-cpp:cpu backends/transformers:cpu
  python bench/llama_cpp_throughput.py --dist dist --work /tmp/llbench [--llama-server PATH]

Run from the repository root with the tests resolve's packages (torch, transformers, tokenizers,
sentencepiece, grpcio): the random Llama (~100M parameters by default) is made once in --work with
tests/integration/llama_cpp_models.py and converted with the pinned archive's converter (f32, the
weights transformers runs). Every request asks for --tokens greedy tokens with EOS ignored, so all
engines generate the same amount. Prints a Markdown table (medians of --repeat runs).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backend:
    def __init__(self, run_sh: Path, env: dict):
        import grpc

        from backends.proto import backend_pb2_grpc

        self.addr = f"127.0.0.1:{free_port()}"
        self.proc = subprocess.Popen([str(run_sh), "--addr", self.addr], env={**os.environ, **env},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.channel = grpc.insecure_channel(self.addr)
        self.stub = backend_pb2_grpc.BackendStub(self.channel)
        from backends.proto import backend_pb2

        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if self.stub.Health(backend_pb2.HealthMessage(), timeout=2).message == b"OK":
                    return
            except grpc.RpcError:
                time.sleep(0.2)
        raise TimeoutError(run_sh)

    def stop(self):
        self.channel.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


def grpc_request(stub, prompt: str, tokens: int):
    from backends.proto import backend_pb2

    start, first, n = time.perf_counter(), None, 0
    for r in stub.PredictStream(backend_pb2.PredictOptions(Prompt=prompt, Tokens=tokens, Temperature=0,
                                                           IgnoreEOS=True), timeout=3600):
        if r.message and first is None:
            first = time.perf_counter() - start
        n = max(n, r.tokens)
    return first or 0.0, n


def server_request(port: int, prompt: str, tokens: int):
    body = json.dumps({"prompt": prompt, "n_predict": tokens, "temperature": 0, "ignore_eos": True,
                       "cache_prompt": False}).encode()
    start = time.perf_counter()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", body, {"Content-Type": "application/json"})
    out = json.loads(urllib.request.urlopen(req, timeout=3600).read())
    return out.get("timings", {}).get("prompt_ms", 0) / 1000 or time.perf_counter() - start, out["tokens_predicted"]


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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dist", type=Path, default=ROOT / "dist")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--llama-server", type=Path, help="llama-server built by hand from the same archive")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    a = p.parse_args()

    from backends.proto import backend_pb2
    from tests.integration.llama_cpp_models import convert, make_model

    hf, gguf = a.work / "hf", a.work / "bench-llama-f32.gguf"
    if not gguf.exists():
        model, _ = make_model(hf, hidden=a.hidden, layers=a.layers, heads=12, kv_heads=12, context=1024)
        print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters", file=sys.stderr)
        del model
        convert(hf, gguf, sdist=ROOT / "3rdparty/native/llama_cpp_python-0.3.36.tar.gz")
    prompts = [f"once upon a time there was a tiny random network number {i}" for i in range(max(a.concurrency))]
    rows = []
    top = max(a.concurrency)
    engines = [
        ("llama-cpp:cpu", lambda: Backend(a.dist / "backends/llama-cpp/cpu/run.sh", {"PYTHON_GRPC_MAX_WORKERS": str(top)}),
         backend_pb2.ModelOptions(Model=str(gguf), ContextSize=256, Threads=a.threads, Options=[f"parallel:{top}"])),
        ("transformers:cpu", lambda: Backend(a.dist / "backends/transformers/cpu/run.sh",
                                             {"PYTHON_GRPC_MAX_WORKERS": str(top)}),
         backend_pb2.ModelOptions(Model=str(hf), Threads=a.threads)),
    ]
    for name, start, options in engines:
        proc = start()
        t0 = time.perf_counter()
        assert proc.stub.LoadModel(options, timeout=600).success
        load = time.perf_counter() - t0
        for c in a.concurrency:
            runs = [concurrent(lambda i, stub=proc.stub: grpc_request(stub, prompts[i], a.tokens), c) for _ in range(a.repeat)]
            rss = proc.stub.Status(backend_pb2.HealthMessage(), timeout=10).memory.breakdown["max_rss"] / 2 ** 20
            rows.append((name, c, statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                         load, rss))
        proc.stop()
    if a.llama_server:
        port = free_port()
        srv = subprocess.Popen([str(a.llama_server), "-m", str(gguf), "--port", str(port), "-c", str(256 * top),
                                "-np", str(top), "-t", str(a.threads), "--no-webui"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.perf_counter()
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                    break
            except Exception:  # noqa: BLE001
                time.sleep(0.2)
        load = time.perf_counter() - t0
        for c in a.concurrency:
            runs = [concurrent(lambda i: server_request(port, prompts[i], a.tokens), c) for _ in range(a.repeat)]
            status = Path(f"/proc/{srv.pid}/status").read_text()
            rss = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024
            rows.append(("llama-server", c, statistics.median(r[0] for r in runs),
                         statistics.median(r[1] for r in runs), load, rss))
        srv.terminate()
        srv.wait(60)
    print("| engine | concurrency | tokens/s (all requests) | TTFT median (s) | load (s) | peak RSS (MB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, c, tps, ttft, load, rss in rows:
        print(f"| {name} | {c} | {tps:.1f} | {ttft:.3f} | {load:.2f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
