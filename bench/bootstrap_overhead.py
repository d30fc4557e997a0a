"""The ./pants bootstrap's own overhead once set up (the issue's budget: at most 1 s).

Usage: python3 bench/bootstrap_overhead.py [runs]
Runs a copy of ./pants whose final `exec` starts `true` instead of Pants, so only the
bootstrap's work is timed (stamp check, environment), and reports the median. Timing Pants
itself alongside would drown a few milliseconds in its own noise on a loaded machine.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    subprocess.run(["./pants", "--version"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)  # set up
    script = open(os.path.join(ROOT, "pants")).read()
    probe = os.path.join(ROOT, ".pants-overhead-probe")
    with open(probe, "w") as f:
        f.write(script.replace('exec "$venv/bin/python" -m pants "$@"', "exec true"))
    try:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(["bash", probe, "--version"], cwd=ROOT, check=True)
            times.append(time.perf_counter() - start)
    finally:
        os.unlink(probe)
    print(f"runs={runs} median={statistics.median(times) * 1000:.1f} ms max={max(times) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
