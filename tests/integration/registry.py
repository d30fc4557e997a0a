"""A real OCI registry for tests: the CNCF distribution registry (Debian's docker-registry),
installed by tests/tools/install-debian-tools.sh when missing, serving plain HTTP on 127.0.0.1."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

INSTALL = Path("tests/tools/install-debian-tools.sh")


def debian_tool(name: str) -> str:
    """Path of a test-only Debian tool, installed by tests/tools/install-debian-tools.sh if missing."""
    found = shutil.which(name)
    if not found:
        result = subprocess.run(["sh", str(INSTALL)], capture_output=True, text=True)
        found = shutil.which(name)
        if result.returncode != 0 or not found:
            raise RuntimeError(f"{INSTALL} could not install {name}:\n{result.stdout}\n{result.stderr}")
    return found


def registry_binary() -> str:
    return debian_tool("docker-registry")


class RegistryServer:
    def __init__(self, root: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.host = f"127.0.0.1:{self.port}"
        root.mkdir(parents=True, exist_ok=True)
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {root / 'data'}\nhttp:\n  addr: {self.host}\n"
        )
        self.log = root / "registry.log"
        self.proc = subprocess.Popen(
            [registry_binary(), "serve", str(config)], stdout=self.log.open("wb"), stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError(f"docker-registry not answering on {self.host}: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
