"""The REAPI remote cache and remote execution, end to end, on real BuildGrid servers.

One cold local build serves as the reference for both halves, so CI pays for one local build:

- Remote cache (3rdparty/buildgrid/cache.yml): clone 1 builds with an empty local store and
  writes to BuildGrid; clone 2, in another directory with another empty store, must get every
  remotely cacheable process from BuildGrid and produce byte-identical artifacts. With the server
  stopped, clone 4, an edit of the backend's code on clone 1's store, still builds (with warnings).
- Remote execution (3rdparty/buildgrid/execution.yml, PostgreSQL scheduler, two test workers
  from reapi_worker.py, each with its own working root): clone 3 packages the same targets with
  pants.remote.toml. Mid-build one worker is SIGKILLed while it runs an action, and a replacement
  starts. Pants must execute nothing locally, every process it sent must be an action a worker ran
  (by action digest), the killed action must be finished by another worker (the test reports
  whether BuildGrid re-queued the lease or Pants re-sent it), and the artifacts must be
  byte-identical to clone 1's.

The workers share nothing with the client but the CAS: each action runs in a bubblewrap sandbox
that shows its input root, the worker image (worker_image.py: the interpreters the `worker`
environment names) and the OS's /usr and /etc, and nothing of the client. A probe action checks
that the client's home, ~/.cache/localai-build, pyenv and the test's folders are invisible inside
it and the image's interpreters are there; no action of the build may name a client path. The
workers' named caches start empty (one folder for all workers, as the runners of one host share
theirs); the network is shared: the workers reach PyPI for pex's downloads.
Wall times go to stdout for docs/benchmarks.md (run with `--test-output=all`); none is asserted.
"""
from __future__ import annotations

import collections
import json
import os
import re
import threading
import time
from pathlib import Path

from tests.integration.backend_process import tree_sha256
from tests.integration.buildgrid import BuildGridServer
from tests.integration.remote_execution import Cluster
from tests.integration.temp_repo import KITTEN_TTS, KITTEN_TTS_SOURCES, MINILM_ENGINE_SOURCES, make_temp_repo, run_pants
from tests.integration.worker_image import worker_image

TARGETS = (KITTEN_TTS, "engines/minilm:avx2")
EDITED = "backends/kitten-tts/backend.py"
SOURCES = (*KITTEN_TTS_SOURCES, *MINILM_ENGINE_SOURCES, "pants.remote.toml")
FOLDER_FILES = ("site-packages/onnxruntime/__init__.py", "start.py", "run.sh", "build-record.json", "sbom.cdx.json", "provenance.intoto.json")
OUTPUTS = ("dist/backends/kitten-tts/cpu", "dist/images/kitten-tts/cpu", "dist/pex/kitten-tts/cpu", "dist/engines/minilm/avx2")
# pants.ci.toml's 3 s lookup timeout turns a slow answer into a local rebuild, by design; on a
# loaded 2-core runner BuildGrid can take longer to check a packed PEX's many blobs, and this test
# is about every process being served, not about the timeout policy.
SLOW_SERVER = {"PANTS_REMOTE_CACHE_RPC_TIMEOUT_MILLIS": "30000"}


def stats(output: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^\s+(\w+): (\d+)$", output, re.MULTILINE)}


def package(repo: Path, store: Path, env: dict[str, str], *targets: str) -> tuple[str, dict[str, int], float]:
    """`pants package` with an empty local store (this machine's named caches: not process results)."""
    start = time.monotonic()
    # Cold ggml took 27 min (instead of ~2.5) on this 2-core machine at load 15-30.
    result = run_pants(repo, f"--local-store-dir={store}", "package", *(targets or TARGETS), env=env, timeout=3300)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stdout[-5000:]
    return result.stdout, stats(result.stdout), elapsed


def cache_env(address: str) -> dict[str, str]:
    return {"PANTS_CONFIG_FILES": "pants.ci.toml", "PANTS_REMOTE_STORE_ADDRESS": address, **SLOW_SERVER}


def remote_execution_env(address: str, scripts_python: dict[str, list]) -> dict[str, str]:
    return {
        "PANTS_CONFIG_FILES": "+['pants.ci.toml', 'pants.remote.toml']",
        "PANTS_REMOTE_STORE_ADDRESS": address,
        "PANTS_REMOTE_EXECUTION_ADDRESS": address,
        # Pants' default is python-build-standalone on GitHub, unreachable here: the stand-in.
        "PANTS_PYTHON_BOOTSTRAP_INTERNAL_PYTHON_BUILD_STANDALONE_INFO": json.dumps(scripts_python),
        **SLOW_SERVER,
    }


# Run inside a worker's sandbox by the image's CPython: which of the paths given exist there.
PROBE = "import json, os, sys; print(json.dumps({p: os.path.exists(p) for p in sys.argv[1:]}))"


def client_paths(tmp_path: Path) -> tuple[str, ...]:
    """This machine's paths no worker may see or name: home, the build's cache, pyenv, the test's folders."""
    pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    return (os.path.expanduser("~"), os.path.expanduser("~/.cache/localai-build"), pyenv, str(tmp_path), os.getcwd())


def probe_isolation(cluster: Cluster, paths: tuple[str, ...]) -> str:
    """A probe action finds the image's interpreters and none of `paths`; returns its digest."""
    seen = cluster.probe("/opt/localai-worker/python3.11/bin/python3.11", "-c", PROBE,
                         "/opt/localai-worker/python3.9/bin/python3", *paths)
    assert seen["exit_code"] == 0, seen
    visible = json.loads(seen["stdout"])
    assert visible.pop("/opt/localai-worker/python3.9/bin/python3"), visible
    assert visible and not any(visible.values()), visible
    return seen["action"]


def assert_names_no_client_path(ran: list[dict], paths: tuple[str, ...]) -> None:
    """No action names a client path (argv or environment)."""
    named = {p: [a["argv"][:3] for a in ran if p in a["client_paths"]] for p in paths}
    assert not any(named.values()), {p: argvs[:3] for p, argvs in named.items() if argvs}


def same_outputs(a: Path, b: Path) -> None:
    for folder in OUTPUTS:
        assert tree_sha256(a / folder), folder
        assert tree_sha256(a / folder) == tree_sha256(b / folder), folder


def test_remote_cache_and_remote_execution(tmp_path) -> None:
    cache_server = BuildGridServer(tmp_path / "buildgrid-cache")
    try:
        clone1 = make_temp_repo(tmp_path / "clone-1", SOURCES)
        out1, s1, cold = package(clone1, tmp_path / "store-1", cache_env(cache_server.address))
        assert s1["remote_cache_write_successes"] > 0 and s1["remote_cache_write_errors"] == 0, s1
        assert set(tree_sha256(clone1 / OUTPUTS[0])) >= set(FOLDER_FILES)

        clone2 = make_temp_repo(tmp_path / "somewhere/else/clone-2", SOURCES)
        out2, s2, cached = package(clone2, tmp_path / "store-2", cache_env(cache_server.address))
        assert s2["local_cache_requests_cached"] == 0  # the local cache really was empty
        assert s2["remote_cache_requests"] > 0
        # On a miss: Pants' warnings (why a read failed), then what clone 2 still ran itself.
        why = [l for l in out2.splitlines() if "WARN" in l or "rror" in l] + [l for l in out2.splitlines() if "Starting:" in l]
        # Every lookup found its entry. Pants 2.17 starts a process locally while its lookup is in
        # flight (speculation delay 0): one that finishes first is counted apart, not as a miss
        # (measured on a loaded runner: 18 hits and 1 local-first of 19, 0 uncached).
        context = "\n".join([*why, f"clone 1: {s1}", f"clone 2: {s2}"])
        assert s2["remote_cache_requests_uncached"] == 0 and s2["remote_cache_read_errors"] == 0, context
        hit_or_raced = s2["remote_cache_requests_cached"] + s2["remote_cache_speculation_local_completed_first"]
        assert hit_or_raced == s2["remote_cache_requests"] and s2["remote_cache_requests_cached"] > 0, context
        same_outputs(clone1, clone2)
        print(f"\nREMOTE-CACHE cold={cold:.1f}s cached={cached:.1f}s ratio={cached / cold:.2f} "
              f"remote_hits={s2['remote_cache_requests_cached']}/{s2['remote_cache_requests']} "
              f"local_executions={s2['local_execution_requests']}")
    finally:
        cache_server.stop()

    # Server down: an edit of the backend's code, on clone 1's local store. The steps the edit
    # changes miss locally, find no server, and run here; the rest are local hits.
    clone4 = make_temp_repo(tmp_path / "clone-4", KITTEN_TTS_SOURCES)
    with (clone4 / EDITED).open("a") as f:
        f.write("# edited while the cache server is down\n")
    out4, _, down = package(clone4, tmp_path / "store-1", cache_env(cache_server.address), KITTEN_TTS)
    assert "remote" in out4.lower() and ("WARN" in out4 or "unavailable" in out4.lower()), out4[-3000:]
    before, after = (tree_sha256(c / "dist/backends/kitten-tts/cpu/site-packages") for c in (clone1, clone4))
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert "localai_backend/backend.py" in changed and all(p.startswith("localai_backend/") for p in changed), changed
    assert "cache server is down" in (clone4 / "dist/backends/kitten-tts/cpu/site-packages/localai_backend/backend.py").read_text()
    print(f"REMOTE-CACHE server-down edit={down:.1f}s (cold with a live server: {cold:.1f}s)")

    paths = client_paths(tmp_path)
    image, scripts_python = worker_image(tmp_path / "worker-image")
    cluster = Cluster(tmp_path / "cluster", image, workers=2, client_paths=paths)
    try:
        probe = probe_isolation(cluster, paths)
        clone3 = make_temp_repo(tmp_path / "somewhere/else/clone-3", SOURCES)
        box: dict = {}

        def remote_build() -> None:
            try:
                box["result"] = package(clone3, tmp_path / "store-3", remote_execution_env(cluster.address, scripts_python))
            except BaseException as e:  # re-raised below, in the test's thread
                box["error"] = e

        # The cluster is a server of its own, empty: nothing clone 1 wrote can answer clone 3.
        build = threading.Thread(target=remote_build)
        build.start()
        # Not the engine compile (the longest action): killing it would double the test's cost.
        killed = cluster.kill_mid_action(
            after_actions=8, min_seconds=3, until=lambda: not build.is_alive(),
            spare=lambda argv: any("cmake_driver" in a for a in argv),
        )
        build.join()
        if "error" in box:
            raise box["error"]
        _, s, remote_wall = box["result"]
        actions = cluster.actions()
    finally:
        cluster.stop()

    # Everything Pants ran, it ran remotely; and each of those requests is an action a worker ran.
    assert s.get("local_execution_requests", 0) == 0, s
    assert s["remote_execution_requests"] > 0 and s["remote_execution_errors"] == 0, s
    ran = [a for a in actions if a["status"] == 0 and a["action"] != probe]
    by_digest = collections.Counter(a["action"] for a in ran)
    # Seen once (cold CI of 218f023): 66 actions for 67 requests; what the workers recorded is
    # printed so that a recurrence says which action is missing or failed.
    assert len(by_digest) == s["remote_execution_requests"], (
        len(by_digest), s, {"killed": killed and (killed[0].name, killed[1]),
                            "not_ok": [a for a in actions if a["status"] != 0],
                            "per_status": collections.Counter(a["status"] for a in actions),
                            "ran_twice": [d for d, n in by_digest.items() if n > 1]})
    per_worker = collections.Counter(a["worker"] for a in ran)
    assert len(per_worker) >= 2, per_worker

    # The killed worker's action was finished by another worker (the survivor or the replacement the
    # cluster starts, so the build keeps two workers). Who brought it back is reported:
    # BuildGrid re-queues a lease whose bot session expired; Pants re-sends an Execute whose stream
    # broke (then remote_execution_rpc_execute exceeds remote_execution_requests).
    assert killed is not None, "no worker was seen running an action for 3 s after 8 actions"
    dead, action = killed
    rerun = [a for a in ran if a["action"] == action["action"]]
    assert rerun and dead.name not in {a["worker"] for a in rerun}, rerun
    pants_resent = s["remote_execution_rpc_execute"] - s["remote_execution_requests"]

    same_outputs(clone1, clone3)

    assert_names_no_client_path(ran, paths)
    print(f"REMOTE-EXECUTION local={cold:.1f}s remote={remote_wall:.1f}s ratio={remote_wall / cold:.2f} "
          f"pants_remote_requests={s['remote_execution_requests']} worker_actions={len(ran)} per_worker={dict(per_worker)} "
          f"killed={dead.name} while running {' '.join(action['argv'][:3])!r} -> rerun by {rerun[0]['worker']} "
          f"execute_rpcs={s['remote_execution_rpc_execute']} pants_resent={pants_resent} "
          f"pants_rpc_retries={s.get('remote_execution_rpc_retries', 0)}")
