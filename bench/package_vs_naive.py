"""CPU artifact size and build time, side by side in one run (issue #2 benchmarks).

Usage: python3 bench/package_vs_naive.py [backend] [--no-naive]     (default: transformers)

Measures, for backends/<backend>:cpu:
  1. cold `./pants package` (empty Pants store and named caches, no pantsd) vs
     `uv pip install` of the same pinned set into a fresh venv with an empty uv cache: wall time
     and CPU time (user+sys of every child process), the latter less sensitive to machine load;
  2. a second `./pants package` of the unchanged target with pantsd warm (the no-op), and one
     after a one-line change to the backend's own source (the edit loop; the file is restored);
  3. the PEX size vs the sum of the wheels it holds (sizes read from the lock's URLs) vs the
     naive LocalAI-style install: the same requirement files into a venv with `uv pip install`,
     `torch==2.13.0` from PyPI, no CPU index (what several LocalAI requirements-cpu.txt do).
Prints a Markdown table for docs/benchmarks.md. Needs network to PyPI; downloads ~3 GB for
the naive install. Run it in a checkout of each revision to compare (e.g. zipapp vs packed):
it reads the PEX whatever its layout.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = Path.home() / ".cache/localai-build/wheelhouse"


def run(cmd, **kw) -> float:
    return timed(cmd, **kw)[0]


def timed(cmd, **kw) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user+sys of the command and every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def pex_info(pex: Path) -> dict:
    """PEX-INFO of a zipapp (a file) or a packed PEX (a directory)."""
    raw = (pex / "PEX-INFO").read_bytes() if pex.is_dir() else zipfile.ZipFile(pex).read("PEX-INFO")
    return json.loads(raw)


def lock_artifacts(lockfile: Path) -> dict[str, str]:
    body = "\n".join(l for l in lockfile.read_text().splitlines() if not l.startswith("//"))
    urls = {}
    for resolve in json.loads(body)["locked_resolves"]:
        for req in resolve["locked_requirements"]:
            for art in req["artifacts"]:
                urls[art["url"].rsplit("/", 1)[-1].replace("%2B", "+")] = art["url"]
    return urls


def uv() -> str:
    found = shutil.which("uv")
    if found:
        return found
    venv = Path(tempfile.gettempdir()) / "bench-uv"
    if not (venv / "bin/uv").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin/pip"), "install", "-q", "uv==0.13.8"], check=True)
    return str(venv / "bin/uv")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    backend = args[0] if args else "transformers"
    naive_install = "--no-naive" not in sys.argv  # --no-naive: skip the ~3 GB naive install (step 3's last row)
    target = f"backends/{backend}:cpu"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    py311 = shutil.which("python3.11") or sys.executable
    work = Path(tempfile.mkdtemp(prefix="bench-"))
    rows = []

    # 1. Cold package vs uv install of the same pinned set.
    pex = ROOT / f"dist/pex/{backend}/cpu/backend.pex"
    shutil.rmtree(pex, ignore_errors=True) if pex.is_dir() else pex.unlink(missing_ok=True)
    cold, cold_cpu = timed(["./pants", "--no-pantsd", f"--local-store-dir={work}/store", f"--named-caches-dir={work}/named",
                            "package", target], cwd=ROOT, env=env)
    dists = sorted(pex_info(pex)["distributions"])
    pinned = work / "pinned.txt"
    pinned.write_text("".join(f"{d.split('-')[0]}=={d.split('-')[1]}\n" for d in dists))
    uv_bin = uv()
    subprocess.run([uv_bin, "venv", "-q", "-p", py311, str(work / "pinned-venv")], check=True, env=env)
    uv_pinned, uv_cpu = timed([uv_bin, "pip", "install", "-q", "--no-cache", "--no-deps", "-p", str(work / "pinned-venv/bin/python"),
                               "--find-links", str(WHEELHOUSE / "cpu"), "-r", str(pinned)], env=env)
    rows.append(("cold `./pants package` (empty caches)", f"{cold:.1f} s", f"CPU {cold_cpu:.1f} s"))
    rows.append(("`uv pip install` of the same pins, empty cache", f"{uv_pinned:.1f} s",
                 f"CPU {uv_cpu:.1f} s; ratio wall {cold / uv_pinned:.2f}, CPU {cold_cpu / uv_cpu:.2f}"))

    # 2. Warm no-op package, then the edit loop: one changed line in the backend's own source.
    run(["./pants", "package", target], cwd=ROOT, env=env)
    warm = run(["./pants", "package", target], cwd=ROOT, env=env)
    rows.append(("second `./pants package`, pantsd warm", f"{warm:.1f} s", "no-op"))
    source = ROOT / f"backends/{backend}/backend.py"
    original = source.read_bytes()
    try:
        source.write_bytes(original + f"\n# bench edit {time.time()}\n".encode())
        edit = run(["./pants", "package", target], cwd=ROOT, env=env)
    finally:
        source.write_bytes(original)
    rows.append(("`./pants package` after a one-line edit of backend.py", f"{edit:.1f} s", "pantsd warm"))

    # 3. Sizes.
    urls = lock_artifacts(ROOT / f"lockfiles/{backend}-cpu.lock")
    wheels = 0
    for d in dists:
        url = urls[d]
        if url.startswith("file://${WHEELHOUSE}"):
            wheels += (WHEELHOUSE / url.split("${WHEELHOUSE}/", 1)[1].replace("%2B", "+")).stat().st_size
        else:
            with urllib.request.urlopen(url) as r:
                wheels += int(r.headers["Content-Length"])
    size = du(pex)
    rows.append(("PEX (backends/%s:cpu)" % backend, f"{size / 1e6:.0f} MB", f"{len(dists)} distributions"))
    rows.append(("sum of the wheels it holds", f"{wheels / 1e6:.0f} MB", f"PEX overhead {100 * (size - wheels) / wheels:+.1f}%"))
    if naive_install:
        naive_reqs = work / "naive-cpu.txt"
        naive_reqs.write_text((ROOT / f"backends/{backend}/requirements-cpu.txt").read_text().replace("+cpu", ""))
        subprocess.run([uv_bin, "venv", "-q", "-p", py311, str(work / "naive-venv")], check=True, env=env)
        naive_time = run([uv_bin, "pip", "install", "-q", "-p", str(work / "naive-venv/bin/python"),
                          "-r", str(ROOT / f"backends/{backend}/requirements.txt"), "-r", str(naive_reqs)], env=env)
        naive = du(work / "naive-venv")
        cuda = sorted(p.name for p in (work / "naive-venv/lib/python3.11/site-packages").iterdir()
                      if p.name.lower().startswith(("nvidia", "cuda", "triton")) and p.suffix == ".dist-info")
        rows.append(("naive venv (PyPI torch, no CPU index)", f"{naive / 1e6:.0f} MB",
                     f"{naive / size:.1f}x the PEX; {len(cuda)} nvidia/cuda/triton packages; install {naive_time:.0f} s"))
    print(f"| measure ({target}) | value | note |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
