"""What a second backend image costs to push, against a real registry.

    python3 bench/image_push.py silero-vad/cpu rerankers/cpu     # after ./pants package of both

Starts Debian's docker-registry (tests/tools/install-debian-tools.sh installs it), pushes
dist/images/<first>/layout then dist/images/<second>/layout with the same client `pants
publish` runs (pants-plugins/localai/oci/scripts/push.py), and prints the bytes each push uploaded and
skipped: each installed distribution of 1 MiB or more is a layer of its own (its RECORD's files), so the second
push skips every distribution of 1 MiB or more (torch first) the first image already brought: each is a layer of its own.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.registry import RegistryServer  # noqa: E402 (after the sys.path setup above)

PUSH = Path("pants-plugins/localai/oci/scripts/push.py")


def push(layout: Path, host: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(PUSH), str(layout), host, "bench/backends", "--plain-http"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(first: str, second: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = RegistryServer(Path(tmp))
        try:
            a = push(Path("dist/images") / first / "layout", server.host)
            b = push(Path("dist/images") / second / "layout", server.host)
        finally:
            server.stop()
    mb = lambda n: f"{n / 1e6:.1f} MB"  # noqa: E731 (a one-line local helper)
    print(f"push {first}: uploaded {mb(a['uploaded_bytes'])}, skipped {mb(a['skipped_bytes'])}")
    print(f"push {second}: uploaded {mb(b['uploaded_bytes'])}, skipped {mb(b['skipped_bytes'])}")
    dists = lambda image: {p.name for p in (Path("dist/backends") / image / "site-packages").glob("*.dist-info")}  # noqa: E731 (a one-line local helper)
    print(f"distributions {second} shares with {first}: {len(dists(first) & dists(second))} of {len(dists(second))}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
