"""A real BuildGrid REAPI server for tests: buildgrid==0.9.1 on CPython 3.13.

cache.yml serves the cache only; execution.yml adds the Execution and Bots services over a
PostgreSQL scheduler (tests/integration/postgres.py).
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

REQUIREMENTS = Path("3rdparty/buildgrid/requirements.txt")
CONFIG = Path("3rdparty/buildgrid/cache.yml")
EXECUTION_CONFIG = Path("3rdparty/buildgrid/execution.yml")


def python313() -> str:
    pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = sorted(glob.glob(f"{pyenv}/versions/3.13*/bin/python3.13"), reverse=True)
    for c in [*candidates, shutil.which("python3.13")]:
        # A pyenv shim is on PATH even when it cannot run 3.13: try each one.
        if c and subprocess.run([c, "-c", "pass"], capture_output=True).returncode == 0:
            return c
    raise RuntimeError("BuildGrid 0.9.1 needs CPython 3.13: `pyenv install 3.13` or put python3.13 on PATH")


def buildgrid_venv() -> Path:
    """A venv with the hash-pinned BuildGrid, made once per machine and requirements version."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]
    venv = Path.home() / ".cache/localai-build" / f"buildgrid-{key}"
    if not (venv / ".ready").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([python313(), "-m", "venv", str(venv)], check=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env.update(PIP_CONFIG_FILE=os.devnull, XDG_CONFIG_DIRS="/nonexistent")
        if Path("/etc/ssl/certs/ca-certificates.crt").exists():
            env.setdefault("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")
        subprocess.run(
            [str(venv / "bin/pip"), "install", "-q", "--require-hashes", "--no-deps", "-r", str(REQUIREMENTS)],
            check=True,
            env=env,
        )
        (venv / ".ready").write_text("ok\n")
    return venv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BuildGridServer:
    def __init__(self, data: Path, config: Path = CONFIG, sql: str | None = None):
        """`sql`: the postgresql:// URL that execution.yml's scheduler needs (migrated here first)."""
        self.port = free_port()
        self.data = data
        data.mkdir(parents=True, exist_ok=True)
        text = config.read_text().replace("${BUILDGRID_PORT}", str(self.port)).replace("${BUILDGRID_DATA}", str(data))
        if sql is not None:
            text = text.replace("${BUILDGRID_SQL}", sql)
            subprocess.run([str(buildgrid_venv() / "bin/bgd"), "migrate", "apply", sql], check=True, capture_output=True)
        (data / "config.yml").write_text(text)
        self.log = (data / "server.log").open("wb")
        self.proc = subprocess.Popen(
            [str(buildgrid_venv() / "bin/bgd"), "server", "start", str(data / "config.yml")],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        # BuildGrid's start (imports, config, scheduler threads) took over 60 s on a 2-core runner at load 15.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"bgd exited: {(data / 'server.log').read_text()[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise TimeoutError(f"BuildGrid did not listen within 300 s: {(data / 'server.log').read_text()[-3000:]}")

    @property
    def address(self) -> str:
        return f"grpc://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
