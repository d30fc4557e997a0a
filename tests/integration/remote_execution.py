"""A remote execution cluster for tests: PostgreSQL, BuildGrid (execution.yml) and REAPI workers.

Each worker (tests/integration/reapi_worker.py) runs under the BuildGrid venv's CPython 3.13 with
its own working root; its actions.jsonl is the record of what it ran. It runs every action in a
bubblewrap sandbox holding the worker image; the workers share one named-cache folder, as the
runners of one worker host do (Pants installs the interpreter it runs pex on there once per
session, docs/remote-cache.md).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.integration.buildgrid import EXECUTION_CONFIG, BuildGridServer, buildgrid_venv
from tests.integration.postgres import PostgresServer
from tests.integration.registry import debian_tool

WORKER = Path(__file__).with_name("reapi_worker.py")


class WorkerProcess:
    def __init__(self, server: BuildGridServer, root: Path, name: str, image: Path, caches: Path, client_paths: tuple[str, ...] = ()):
        self.root = root
        self.name = name
        root.mkdir(parents=True, exist_ok=True)
        self.log = (root / "worker.log").open("ab")
        self.proc = subprocess.Popen(
            # -I: the script folder holds tests/integration/buildgrid.py, which would shadow the buildgrid package.
            [str(buildgrid_venv() / "bin/python"), "-I", str(WORKER), "--server", f"127.0.0.1:{server.port}",
             "--root", str(root), "--name", name, "--image", str(image), "--caches", str(caches),
             "--bwrap", debian_tool("bwrap"), *(f"--client-path={p}" for p in client_paths)],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def actions(self) -> list[dict]:
        path = self.root / "actions.jsonl"
        return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []

    def running(self) -> dict | None:
        """The action the worker runs now (its running.json), if any."""
        try:
            return json.loads((self.root / "running.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def kill(self) -> None:
        """SIGKILL the worker and the action it runs: no goodbye to BuildGrid, as a crash would."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        self.kill()


class Cluster:
    def __init__(self, data: Path, image: Path, workers: int = 2, client_paths: tuple[str, ...] = ()):
        self.data = data
        self.image = image
        self.caches = data / "worker-caches"
        self.client_paths = client_paths
        self.postgres = PostgresServer()
        try:
            self.server = BuildGridServer(data / "buildgrid", EXECUTION_CONFIG, sql=self.postgres.connection_string)
        except Exception:
            self.postgres.stop()
            raise
        self.workers = [
            WorkerProcess(self.server, data / f"worker-{i + 1}", f"worker-{i + 1}", image, self.caches, client_paths)
            for i in range(workers)
        ]

    def add_worker(self) -> WorkerProcess:
        """A replacement, as a fleet would start one: the build keeps its parallelism after a kill."""
        n = len(self.workers) + 1
        w = WorkerProcess(self.server, self.data / f"worker-{n}", f"worker-{n}", self.image, self.caches, self.client_paths)
        self.workers.append(w)
        return w

    @property
    def address(self) -> str:
        return self.server.address

    def actions(self) -> list[dict]:
        return [a for w in self.workers for a in w.actions()]

    def probe(self, *argv: str) -> dict:
        """Runs `argv` as an action on the workers (reapi_worker.py probe): exit code, stdout, stderr."""
        out = subprocess.run([str(buildgrid_venv() / "bin/python"), "-I", str(WORKER), "probe", "--server",
                              f"127.0.0.1:{self.server.port}", "--", *argv], capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout)

    def kill_mid_action(self, after_actions: int, min_seconds: float, until, spare=lambda argv: False):
        """Once `after_actions` actions have finished, SIGKILLs the first worker that has been running
        one action for `min_seconds` (unless `spare(argv)`) and starts a replacement; returns the
        killed worker and its action, or None if `until()` came first."""
        seen: dict[str, tuple[str, float]] = {}
        while not until():
            if len(self.actions()) >= after_actions:
                for w in self.workers:
                    current = w.running() if w.proc.poll() is None else None
                    if current is None or spare(current["argv"]):
                        seen.pop(w.name, None)
                        continue
                    lease, since = seen.setdefault(w.name, (current["lease"], time.monotonic()))
                    if lease != current["lease"]:
                        seen[w.name] = (current["lease"], time.monotonic())
                    elif time.monotonic() - since >= min_seconds:
                        w.kill()
                        self.add_worker()
                        return w, current
            time.sleep(0.2)
        return None

    def stop(self) -> None:
        for w in self.workers:
            w.stop()
        self.server.stop()
        self.postgres.stop()
