"""What a second backend image costs to push, against a real registry.

    python3 bench/image_push.py silero-vad/cpu rerankers/cpu     # after ./pants package of both

Starts Debian's docker-registry (tests/tools/install-debian-tools.sh installs it), pushes
dist/images/<first>/layout then dist/images/<second>/layout with the same client `pants
publish` runs (pants-plugins/localai/oci_push.py), and prints the bytes each push uploaded and
skipped. Then, from the two zipapp PEXes, what a packed PEX layout (one file per wheel, shared
when the wheel is the same) would have let the second push skip: the compressed size of the
`.deps/<wheel>/` entries both PEXes hold for the same wheel file.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.registry import RegistryServer  # noqa: E402

PUSH = Path("pants-plugins/localai/oci_push.py")


def push(layout: Path, host: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(PUSH), str(layout), host, "bench/backends", "--plain-http"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def deps_sizes(pex: Path) -> dict[str, int]:
    sizes: dict[str, int] = defaultdict(int)
    with zipfile.ZipFile(pex) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if parts[0] == ".deps" and len(parts) > 2:
                sizes[parts[1]] += info.compress_size
    return dict(sizes)


def main(first: str, second: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = RegistryServer(Path(tmp))
        try:
            a = push(Path("dist/images") / first / "layout", server.host)
            b = push(Path("dist/images") / second / "layout", server.host)
        finally:
            server.stop()
    mb = lambda n: f"{n / 1e6:.1f} MB"  # noqa: E731
    print(f"push {first}: uploaded {mb(a['uploaded_bytes'])}, skipped {mb(a['skipped_bytes'])}")
    print(f"push {second}: uploaded {mb(b['uploaded_bytes'])}, skipped {mb(b['skipped_bytes'])}")
    da = deps_sizes(Path("dist/backends") / first / "backend.pex")
    db = deps_sizes(Path("dist/backends") / second / "backend.pex")
    shared = {w: db[w] for w in db if w in da}
    total_b = sum(db.values())
    top = sorted(shared.items(), key=lambda kv: -kv[1])[:3]
    print(
        f"packed layout: {second} would share {mb(sum(shared.values()))} of its {mb(total_b)} of wheels "
        f"with {first} ({len(shared)} wheels; largest: {', '.join(f'{w} {mb(n)}' for w, n in top)})"
    )


if __name__ == "__main__":
    main(*sys.argv[1:3])
