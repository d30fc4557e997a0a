"""Starts a packaged backend PEX as a subprocess, as LocalAI does, and talks to it over gRPC."""
from __future__ import annotations

import ast
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable

import grpc

from backends.proto import backend_pb2, backend_pb2_grpc

# The engine levels every ggml backend's BUILD lists (engines=[...]).
LISTED_CPU_LEVELS = ("fallback", "avx2", "avx512")


def packaged_cpu_levels(levels: tuple[str, ...] = LISTED_CPU_LEVELS) -> tuple[str, ...]:
    """The engine CPU levels a backend listing `levels` carries: those .ci/run keeps with
    PANTS_LOCALAI_NATIVE_CPU_LEVELS (passed to tests by pants.toml's [test].extra_env_vars), or all."""
    kept = os.environ.get("PANTS_LOCALAI_NATIVE_CPU_LEVELS")
    if not kept:
        return levels
    names = ast.literal_eval(kept)  # a Pants list option value, e.g. "['fallback', 'avx2']"
    return tuple(level for level in levels if level in names)


def packaged_levels(names: Iterable[str], engine: str, library: str) -> set[str]:
    """The CPU levels of `engine` whose `library` is among a PEX's file names."""
    prefix = f"localai_backend/engines/{engine}/"
    return {n.split(prefix, 1)[1].split("/")[0] for n in names if prefix in n and n.endswith(f"/{library}")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dist_path(backend: str, accelerator: str, name: str = "run.sh") -> Path:
    """Where `pants package` (runtime_package_dependencies) puts a backend folder's files."""
    path = Path("backends") / backend / accelerator / name
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: add backends/{backend}:{accelerator} to runtime_package_dependencies")
    return path


def folder_python(folder: Path) -> list[str]:
    """argv prefix of the interpreter a backend folder's run.sh starts, as run.sh starts it (its
    portable CPython, else python3.X from PATH; `-I -S -B`): append a script that adds the
    folder's site-packages/ to run code with the folder's own libraries."""
    import re

    found = re.search(r"^exec (\S+) -I -S -B ", (folder / "run.sh").read_text(), re.MULTILINE)
    if found is None:
        raise ValueError(f"{folder / 'run.sh'} has no `exec <python> -I -S -B` line")
    return [found.group(1).strip('"').replace("$dir", str(folder)), "-I", "-S", "-B"]


def pex_path(backend: str, accelerator: str) -> Path:
    """The PEX that `pants package` installs a backend folder from (dist/pex/, beside the folder)."""
    path = Path("pex") / backend / accelerator / "backend.pex"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: add backends/{backend}:{accelerator} to runtime_package_dependencies")
    return path


class BackendProcess:
    """`run.sh --addr 127.0.0.1:<port>` with a stub connected to it; stops with SIGTERM.

    ``launcher``: a command that starts run.sh as its child (e.g. to play LocalAI's process).
    The server gets a fresh, empty TMPDIR and HOME (unless ``env`` names its own): a folder writes
    nothing outside itself, so leaving the ``with`` block without an error asserts they are still
    empty (assert_wrote_nothing_outside), as a library's cache, telemetry or scratch file would not.
    """

    def __init__(
        self, backend: str, accelerator: str = "cpu", env: dict[str, str] | None = None, launcher=(), run_sh: Path | None = None
    ):
        # ``run_sh``: a run.sh packaged elsewhere (a temporary repository's dist/).
        self.run_sh = run_sh or dist_path(backend, accelerator)
        port = free_port()
        self.addr = f"127.0.0.1:{port}"
        self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"{backend}-{accelerator}-{port}.log"
        self.outside = {name: tempfile.mkdtemp(prefix=f"{backend}-{name.lower()}-") for name in ("TMPDIR", "HOME")
                        if name not in (env or {})}
        env = {**os.environ, "HF_HUB_OFFLINE": "1", **self.outside, **(env or {})}
        token = env.get("LOCALAI_GRPC_AUTH_TOKEN", "")
        # What every call must carry when the backend runs with LocalAI's bearer token.
        self.metadata = [("authorization", f"Bearer {token}")] if token else []
        self.proc = subprocess.Popen(
            [*launcher, str(self.run_sh), "--addr", self.addr], env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT
        )
        self.channel = grpc.insecure_channel(
            self.addr, options=[("grpc.max_receive_message_length", 50 * 1024 * 1024)]
        )
        self.stub = backend_pb2_grpc.BackendStub(self.channel)

    def wait_healthy(self, timeout: float = 300.0) -> float:
        """Seconds from start until Health answers OK."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.run_sh} exited with {self.proc.returncode}:\n{self.output()}")
            try:
                if self.stub.Health(backend_pb2.HealthMessage(), metadata=self.metadata, timeout=2).message == b"OK":
                    return time.monotonic() - start
            except grpc.RpcError:
                time.sleep(0.2)
        raise TimeoutError(f"{self.run_sh} not healthy after {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-5000:]

    def stop(self) -> int:
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> "BackendProcess":
        self.wait_healthy()
        return self

    def assert_wrote_nothing_outside(self) -> None:
        written = sorted(str(p) for path in self.outside.values() for p in Path(path).rglob("*"))
        assert not written, f"{self.run_sh}: the backend wrote outside its folder: {written}"

    def __exit__(self, *exc) -> None:
        self.stop()
        if exc[0] is None:
            self.assert_wrote_nothing_outside()


def pex_root() -> Path:
    """PEX_ROOT shared by the tests of one machine (a Pants named cache when available)."""
    root = Path(os.environ.get("LOCALAI_TEST_PEX_ROOT", Path(os.environ.get("TMPDIR", "/tmp")) / "pex_root"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def pex_distributions(pex: Path) -> list[str]:
    """The wheels of a packed PEX (backend.pex/ is a directory: PEX-INFO, .deps/<wheel>)."""
    import json

    return sorted(json.loads((pex / "PEX-INFO").read_text())["distributions"])


def pex_files(pex: Path) -> set[str]:
    """The loose files of a packed PEX: the backend's own sources and package data."""
    return {p.relative_to(pex).as_posix() for p in pex.rglob("*") if p.is_file() and ".deps" not in p.parts}


def tree_sha256(root: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under `root`: two trees compare equal byte for byte."""
    import hashlib

    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}
