"""LocalAI's own way of building a Python backend, measured beside `./pants package` (issue #25 item 3).

Usage:
  python3 bench/localai_method.py [--localai DIR] [--backends rerankers,transformers,kokoro] [--runs 3]
        [--python 3.11] [--ours] [--drift DIR2 --dates 2026-05-01,2026-11-01] [--json OUT]
  python3 bench/localai_method.py --report OUT        # the report of an earlier --json run

DIR and DIR2 are `git archive`s of LocalAI revisions holding backend/backend.proto and
backend/python/<name>/requirements*.txt; nothing of them is copied into this repository.
uv is installed by the bench itself (`pip install uv==<UV_VERSION>` into a venv in the temp dir).

What LocalAI's backend/python/common/libbackend.sh does for a CPU build (BUILD_TYPE unset, so
BUILD_PROFILE is "cpu"), re-done here from its documented behaviour without Docker:
  1. `uv venv --python <version> venv` (its USE_PIP=false default);
  2. `uv pip install --requirement F` for each F that exists, one call per file, in the order
     requirements-install.txt, requirements.txt, requirements-${BUILD_TYPE}.txt,
     requirements-${BUILD_PROFILE}.txt (BUILD_TYPE != BUILD_PROFILE), requirements-cpu.txt (BUILD_TYPE
     empty), requirements-after.txt, requirements-${BUILD_PROFILE}-after.txt. With BUILD_TYPE empty
     requirements-cpu.txt is named twice; the second call is a no-op and is made as the script does.
     Each call sees PyPI plus whatever index lines the file itself holds (uv reads them);
  3. runProtogen: a throwaway uv venv with `grpcio-tools<=<grpcio> protobuf<=<protobuf>` of the
     backend's venv, `python -m grpc_tools.protoc` of backend.proto, and an import check of the
     stubs with the backend's python.
  kokoro's install.sh then runs `python -m spacy download en_core_web_sm`, a GitHub download
  (unreachable here): not run, said in the output.

Measured per backend: wall time cold (empty uv cache) and warm (the same cache, a fresh venv),
median of --runs; the venv's size on disk; its distributions and the nvidia/cuda/triton ones.
With --ours, `./pants package backends/<name>:cpu` beside it, the two alternating run by run: cold
(no pantsd, empty local store and named caches) and warm (no pantsd, the store the cold run
filled, i.e. a fresh Pants process with warm caches, the counterpart of the warm uv cache), and
the PEX's distributions, folder size, unpacked size and the image tarball's size. The venv's
nvidia/cuda/triton distributions are sized by the bytes their RECORD lists.
With --drift, the files of revision DIR2 resolved together (`uv pip compile`, no install) once per
date with uv's `--exclude-newer`: which distributions get a different version. Our side cannot
drift: the lockfile pins every distribution's version and sha256 and the build reads only the lock.

A file that names an index this machine cannot reach (kokoro's requirements-cpu.txt names the
PyTorch CPU index) makes uv fail; the output says so and the backend is measured again with
those index lines dropped, which is what a user behind the same wall gets: torch from PyPI.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UV_VERSION = "0.13.9"  # from PyPI, pinned: the bench measures LocalAI's method, not uv's changes
CUDA_NAME = re.compile(r"^(nvidia-.+|cuda-.+|triton)$")  # normalized names; not e.g. tritonclient
INDEX_LINE = re.compile(r"^\s*--(extra-index-url|index-url|find-links|-i)\b\s*=?\s*(\S+)", re.M)


def uv_binary(work: Path) -> str:
    venv = work / f"uv-{UV_VERSION}"
    if not (venv / "bin/uv").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin/pip"), "install", "-q", f"uv=={UV_VERSION}"], check=True)
    return str(venv / "bin/uv")


def requirement_files(backend_dir: Path, build_type: str = "", build_profile: str = "cpu") -> list[Path]:
    """The files libbackend.sh's installRequirements installs, in its order (existing ones only)."""
    names = ["requirements-install.txt", "requirements.txt", f"requirements-{build_type}.txt"]
    if build_type != build_profile:
        names.append(f"requirements-{build_profile}.txt")
    if not build_type:
        names.append("requirements-cpu.txt")
    names.append("requirements-after.txt")
    if build_type != build_profile:
        names.append(f"requirements-{build_profile}-after.txt")
    return [backend_dir / n for n in names if (backend_dir / n).is_file()]


def clean_env(cache: Path, venv: Path | None = None) -> dict:
    """No host pip/uv configuration: uv sees PyPI and the files' own index lines only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV"))}
    env.update(UV_CACHE_DIR=str(cache), UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never")
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
    return env


def cpu_seconds() -> float:
    """user+sys of every finished child process and its waited-for descendants (Pants' sandboxes too)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class Failed(Exception):
    pass


def sh(cmd, env, log: Path) -> float:
    start = time.perf_counter()
    with log.open("a") as out:
        out.write(f"$ {' '.join(map(str, cmd))}\n")
        out.flush()
        rc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        tail = log.read_text().splitlines()[-6:]
        raise Failed(f"exit {rc}: {' '.join(map(str, cmd))}\n    " + "\n    ".join(tail))
    return time.perf_counter() - start


def without_index_lines(files: list[Path], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    copies = []
    for i, f in enumerate(files):
        copy = out_dir / f"{i}-{f.name}"
        copy.write_text(INDEX_LINE.sub(lambda m: f"# dropped (unreachable here): {m.group(0).strip()}", f.read_text()))
        copies.append(copy)
    return copies


def localai_install(uv: str, backend_dir: Path, proto: Path, files: list[Path], venv: Path, cache: Path,
                    python: str, log: Path, exclude_newer: str | None = None, protogen: bool = True) -> dict:
    """libbackend.sh's ensureVenv + installRequirements (+ runProtogen): wall time of each step."""
    shutil.rmtree(venv, ignore_errors=True)
    env = clean_env(cache, venv)
    steps = {"venv": sh([uv, "venv", "-q", "--python", python, str(venv)], env, log)}
    extra = ["--exclude-newer", exclude_newer] if exclude_newer else []
    for i, f in enumerate(files):
        steps[f"{i}:{f.name}"] = sh([uv, "pip", "install", "--requirement", str(f), *extra], env, log)
    if protogen:
        steps["protogen"] = protogen_step(uv, proto, venv, cache, log)
    return steps


def protogen_step(uv: str, proto: Path, venv: Path, cache: Path, log: Path) -> float:
    start = time.perf_counter()
    py = str(venv / "bin/python")
    version = lambda dist: subprocess.run(  # noqa: E731 (a one-line local helper)
        [py, "-c", f"import importlib.metadata as m; print(m.version('{dist}'))"], capture_output=True, text=True
    ).stdout.strip()
    spec = ["grpcio-tools" + (f"<={version('grpcio')}" if version("grpcio") else "")]
    if version("protobuf"):
        spec.append(f"protobuf<={version('protobuf')}")
    with tempfile.TemporaryDirectory() as tmp:
        tools, out = Path(tmp) / "protogen", Path(tmp) / "stubs"
        out.mkdir()
        sh([uv, "venv", "-q", str(tools)], clean_env(cache), log)
        sh([uv, "pip", "install", *spec], clean_env(cache, tools), log)
        sh([str(tools / "bin/python"), "-m", "grpc_tools.protoc", f"-I{proto.parent}", "--python_out", str(out),
            "--grpc_python_out", str(out), str(proto)], clean_env(cache), log)
        sh([py, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import backend_pb2, backend_pb2_grpc", str(out)],
           clean_env(cache), log)
    return time.perf_counter() - start


def du(path: Path) -> int:
    seen, total = set(), 0
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def venv_distributions(venv: Path) -> dict[str, str]:
    return {n: v for n, (v, _) in venv_records(venv).items()}


def venv_records(venv: Path) -> dict[str, tuple[str, int]]:
    """name -> (version, installed bytes): the sizes each distribution's RECORD lists."""
    out = {}
    for info in (venv / "lib").glob("python*/site-packages/*.dist-info"):
        meta = (info / "METADATA").read_text(errors="replace")
        name = normalize(re.search(r"^Name: (.+)$", meta, re.M).group(1).strip())
        size = 0
        if (info / "RECORD").is_file():
            for row in (info / "RECORD").read_text(errors="replace").splitlines():
                parts = row.rsplit(",", 2)
                size += int(parts[2]) if len(parts) == 3 and parts[2].isdigit() else 0
        out[name] = (re.search(r"^Version: (.+)$", meta, re.M).group(1).strip(), size)
    return out


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def cuda_packages(dists) -> list[str]:
    """The GPU runtime distributions a CPU build has no use for: nvidia-*, cuda-*, triton."""
    return sorted(d for d in dists if CUDA_NAME.match(normalize(d)))


def version_changes(by_date: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """Distributions whose version differs between resolutions ("-": absent), versions in date order."""
    names = sorted(set().union(*by_date.values())) if by_date else []
    return {n: [pins.get(n, "-") for pins in by_date.values()] for n in names
            if len({pins.get(n, "-") for pins in by_date.values()}) > 1}


def compiled_pins(text: str) -> dict[str, str]:
    """name -> version from `uv pip compile` output (`name==version` lines, comments ignored)."""
    pins = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:==|@)\s*(\S+)", line.strip())
        if m:  # `name @ url` (a direct reference) keeps its URL as the "version"
            pins[normalize(m.group(1))] = m.group(2)
    return pins


# ---- ours ------------------------------------------------------------------------------------


def pants_package(name: str, work: Path, cold: bool, log: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    store = work / "pants-store"
    if cold:
        shutil.rmtree(store, ignore_errors=True)
    # --stats-log: the cache hit counters in the log say whether a warm run re-ran anything
    cmd = ["./pants", "--no-pantsd", "--stats-log", f"--local-store-dir={store}/lmdb", f"--named-caches-dir={store}/named",
           "package", f"backends/{name}:cpu"]
    start = time.perf_counter()
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=out, stderr=subprocess.STDOUT)
    return time.perf_counter() - start


def pex_facts(name: str) -> dict:
    pex = ROOT / f"dist/pex/{name}/cpu/backend.pex"
    info = json.loads((pex / "PEX-INFO").read_text())
    dists = {}
    for wheel in info["distributions"]:
        n, v = wheel.split("-")[:2]
        dists[normalize(n)] = v
    unpacked = 0
    for z in (pex / ".deps").iterdir():
        with zipfile.ZipFile(z) as zf:
            unpacked += sum(i.file_size for i in zf.infolist())
    lock = ROOT / f"lockfiles/{name}-cpu.lock"
    image = ROOT / f"dist/images/{name}/cpu/image.oci.tar"
    return {"distributions": dists, "folder_bytes": du(ROOT / f"dist/backends/{name}/cpu"), "unpacked_bytes": unpacked,
            "image_bytes": image.stat().st_size if image.is_file() else None,
            "cuda": cuda_packages(dists), "lockfile": str(lock.relative_to(ROOT))}


# ---- report ----------------------------------------------------------------------------------


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs) -> str:
    return f"{median(xs):.1f} s ({min(xs):.1f}-{max(xs):.1f})" if xs else "-"


def measure_backend(args, uv: str, name: str, work: Path) -> dict:
    backend_dir = args.localai / "backend/python" / name
    proto = args.localai / "backend/backend.proto"
    files = requirement_files(backend_dir)
    log = work / f"{name}.log"
    result = {"backend": name, "files": [f.name for f in files], "notes": []}
    unreachable = sorted({m.group(2) for f in files for m in INDEX_LINE.finditer(f.read_text())
                          if not reachable(m.group(2))})
    if unreachable:
        try:  # LocalAI's files as they are: uv stops at the unreachable index
            localai_install(uv, backend_dir, proto, files, work / f"{name}-venv", work / f"{name}-probe-cache",
                            args.python, log)
            result["notes"].append(f"{unreachable} did not answer the probe but the install passed")
        except Failed as e:
            result["notes"].append(f"as written: fails here, {unreachable} unreachable: {str(e).splitlines()[-1].strip()}")
            files = without_index_lines(files, work / f"{name}-files")
            result["notes"].append("measured with those index lines dropped (torch then comes from PyPI)")
        shutil.rmtree(work / f"{name}-probe-cache", ignore_errors=True)
    if name == "kokoro":
        result["notes"].append("install.sh's `python -m spacy download en_core_web_sm` (GitHub) not run")
    times = {k: [] for k in ("localai_cold", "localai_warm", "ours_cold", "ours_warm")}
    cpu = {k: [] for k in times}

    def timed(key: str, step) -> None:
        wall, before = time.perf_counter(), cpu_seconds()
        step()
        times[key].append(time.perf_counter() - wall)
        cpu[key].append(cpu_seconds() - before)

    for run in range(args.runs):
        cache = work / f"{name}-uv-cache"
        shutil.rmtree(cache, ignore_errors=True)
        def install(cache: Path = cache) -> None:
            steps = localai_install(uv, backend_dir, proto, files, work / f"{name}-venv", cache, args.python, log)
            result.setdefault("steps", []).append(steps)

        timed("localai_cold", install)
        if args.ours:
            timed("ours_cold", lambda: pants_package(name, work, cold=True, log=log))
        timed("localai_warm", install)
        if args.ours:
            timed("ours_warm", lambda: pants_package(name, work, cold=False, log=log))
        print(f"  {name} run {run + 1}: " + "; ".join(f"{k} {times[k][-1]:.1f} s wall {cpu[k][-1]:.1f} s CPU"
                                                     for k in times if times[k]) + f"  [{load()}]", flush=True)
    venv = work / f"{name}-venv"
    records = venv_records(venv)
    dists = {n: v for n, (v, _) in records.items()}
    cuda = cuda_packages(dists)
    result.update(times, cpu=cpu, venv_bytes=du(venv), localai_distributions=dists,
                  localai_cuda=cuda, localai_cuda_bytes={n: records[n][1] for n in cuda})
    shutil.rmtree(work / f"{name}-uv-cache", ignore_errors=True)
    if args.ours:
        result.update(ours=pex_facts(name))
    return result


def reachable(url: str) -> bool:
    import urllib.request

    try:
        urllib.request.urlopen(url.rstrip("/") + "/", timeout=10).close()
        return True
    except Exception:  # DNS, refused, TLS, HTTP: all mean "not usable here"
        return False


def drift(args, uv: str, name: str, work: Path) -> dict:
    """The files of one LocalAI revision resolved once per --exclude-newer date (`uv pip compile`).

    One resolution of all the files in install order, not one per file: the same set the
    sequential installs end with unless two files conflict (then the compile fails, and says so).
    """
    backend_dir = args.drift / "backend/python" / name
    files = requirement_files(backend_dir)
    notes = []
    dead = [m.group(2) for f in files for m in INDEX_LINE.finditer(f.read_text()) if not reachable(m.group(2))]
    if dead:
        files = without_index_lines(files, work / f"{name}-drift-files")
        notes.append(f"index lines dropped (unreachable here): {sorted(set(dead))}")
    by_date, errors = {}, {}
    for date in args.dates:
        cmd = [uv, "pip", "compile", "--quiet", "--no-header", "--python-version", args.python,
               "--exclude-newer", f"{date}T00:00:00Z", *map(str, files)]
        proc = subprocess.run(cmd, env=clean_env(work / "drift-uv-cache"), capture_output=True, text=True)
        if proc.returncode == 0:
            by_date[date] = compiled_pins(proc.stdout)
        else:
            errors[date] = " ".join(proc.stderr.split())[-400:]
    return {"backend": name, "dates": args.dates, "files": [f.name for f in files], "notes": notes,
            "counts": {d: len(v) for d, v in by_date.items()}, "differ": version_changes(by_date),
            "errors": errors, "cuda": {d: cuda_packages(v) for d, v in by_date.items()},
            "pins": by_date}


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--localai", type=Path, help="LocalAI checkout (backend/python/<name>/) to measure")
    p.add_argument("--backends", default="rerankers,transformers,kokoro")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--python", default="3.11", help="LocalAI's default is 3.10; ours is 3.11")
    p.add_argument("--ours", action="store_true", help="also time ./pants package, alternating with LocalAI's")
    p.add_argument("--drift", type=Path, help="LocalAI checkout of the revision whose files are resolved per date")
    p.add_argument("--dates", type=lambda s: s.split(","), default=["2026-05-01", "2026-11-01"])
    p.add_argument("--json", type=Path, help="write every figure here")
    p.add_argument("--report", type=Path, help="print the report of an earlier --json file and exit")
    args = p.parse_args()
    if args.report:
        report(json.loads(args.report.read_text()), args)
        return
    if not args.localai and not args.drift:
        p.error("give --localai DIR (measure), --drift DIR (resolve per date), or both")
    work = Path(tempfile.mkdtemp(prefix="localai-method-"))
    uv = uv_binary(Path(tempfile.gettempdir()))
    print(f"uv {UV_VERSION}, python {args.python}, work {work}, {load()}", flush=True)
    results = {"measure": [], "drift": []}
    for name in args.backends.split(","):
        if args.localai:
            results["measure"].append(measure_backend(args, uv, name, work))
        if args.drift:
            results["drift"].append(drift(args, uv, name, work))
            print(f"  {name} drift done [{load()}]", flush=True)
        if args.json:  # after every backend: a long run that is stopped keeps what it measured
            args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    report(results, args)
    for entry in work.iterdir():  # the venvs and caches are GBs; the logs are what explains a number
        if entry.suffix != ".log":
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()
    print(f"logs: {work}")


def report(results, args) -> None:
    mb = lambda n: f"{n / 1e6:,.0f} MB"  # noqa: E731 (a one-line local helper)
    for r in results["measure"]:
        cpu = r.get("cpu", {})

        def t(k: str, r: dict = r, cpu: dict = cpu) -> str:
            return f"{spread(r[k])} wall" + (f" / {median(cpu[k]):.1f} s CPU" if cpu.get(k) else "")

        print(f"\n{r['backend']} (CPU): files {r['files']}")
        print(f"  LocalAI's method: cold {t('localai_cold')}, warm {t('localai_warm')}; "
              f"venv {mb(r['venv_bytes'])}, {len(r['localai_distributions'])} distributions, "
              f"torch {r['localai_distributions'].get('torch', '-')}")
        cuda = r["localai_cuda_bytes"]
        print(f"  nvidia/cuda/triton: {len(cuda)}, {mb(sum(cuda.values()))}: "
              + ", ".join(f"{n} {r['localai_distributions'][n]} ({mb(b)})" for n, b in sorted(cuda.items())))
        if "ours" in r:
            o = r["ours"]
            image = mb(o["image_bytes"]) if o["image_bytes"] is not None else "-"
            print(f"  ours: cold {t('ours_cold')}, warm {t('ours_warm')}; folder "
                  f"{mb(o['folder_bytes'])}, PEX unpacked {mb(o['unpacked_bytes'])}, image {image}, "
                  f"{len(o['distributions'])} distributions, torch {o['distributions'].get('torch', '-')}, "
                  f"nvidia/cuda/triton {len(o['cuda'])}; {o['lockfile']}")
            pairs = [("cold wall", r["ours_cold"], r["localai_cold"]), ("warm wall", r["ours_warm"], r["localai_warm"])]
            if cpu.get("ours_cold"):
                pairs += [("cold CPU", cpu["ours_cold"], cpu["localai_cold"]), ("warm CPU", cpu["ours_warm"], cpu["localai_warm"])]
            for what, a, b in (*pairs,
                               ("size (folder / venv)", [o["folder_bytes"]], [r["venv_bytes"]]),
                               ("size (PEX unpacked / venv)", [o["unpacked_bytes"]], [r["venv_bytes"]])):
                print(f"  ratio ours/LocalAI {what}: {median(a) / median(b):.2f}")
        for n in r["notes"]:
            print(f"  - {n}")
    for d in results["drift"]:
        print(f"\n{d['backend']} drift, {' vs '.join(d['dates'])}: {d['counts']} distributions, "
              f"{len(d['differ'])} differ; nvidia/cuda/triton { {k: len(v) for k, v in d['cuda'].items()} }")
        for n, vs in d["differ"].items():
            print(f"  {n}: {' -> '.join(vs)}")
        for date, err in d["errors"].items():
            print(f"  {date}: failed: {err}")
        for n in d["notes"]:
            print(f"  - {n}")


if __name__ == "__main__":
    main()
