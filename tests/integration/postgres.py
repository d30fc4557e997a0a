"""A private PostgreSQL cluster for one test: BuildGrid 0.9.1's scheduler accepts no other database.

Debian's postgresql (15) provides initdb/pg_ctl; tests/tools/install-debian-tools.sh installs it.
The cluster listens on a Unix socket in its own directory only (no TCP port to collide with),
trusts local connections and is removed on stop. PostgreSQL refuses to run as root, so under
root it runs as the `postgres` account the Debian package creates.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def _bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if not found:
        raise RuntimeError(f"{name} not found: run tests/tools/install-debian-tools.sh (Debian package postgresql)")
    return found


class PostgresServer:
    def __init__(self) -> None:
        # Not under pytest's tmp_path: its parents are private to root, and the server may run as `postgres`.
        self.root = Path(tempfile.mkdtemp(prefix="localai-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.socket_dir.mkdir()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.socket_dir, "postgres")
        self._run(_bin("initdb"), "-D", str(self.data), "-U", "bgd", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-k {self.socket_dir} -c listen_addresses='' -c fsync=off -c max_connections=200"
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "server.log"), "-w", "start")
        self._run(_bin("createdb"), "-h", str(self.socket_dir), "-U", "bgd", "bgd")

    def _run(self, *argv: str) -> None:
        result = subprocess.run([*self._as, *argv], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")

    @property
    def connection_string(self) -> str:
        return f"postgresql://bgd@/bgd?host={self.socket_dir}"

    def stop(self) -> None:
        subprocess.run([*self._as, _bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
