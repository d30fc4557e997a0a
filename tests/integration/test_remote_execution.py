"""Remote execution, end to end: a fresh clone's build runs on BuildGrid's workers.

BuildGrid 0.9.1 (execution.yml, PostgreSQL scheduler) and two test workers (reapi_worker.py,
each with its own working root) start; a clone with an empty local store and empty named caches
packages the targets with pants.remote.toml while, beside it, another clone with its own empty
store packages them locally as the reference. Mid-build one worker is SIGKILLed while it runs
an action, and a replacement starts. The test checks that Pants executed nothing locally, that
every process Pants sent is one the workers ran (by action digest), that the killed action was
finished by another worker (and it reports whether BuildGrid re-queued the lease or Pants
re-sent the action), and that the artifacts are byte-identical to the local build.

What it does not prove: the workers share this machine, its filesystem and its network with the
client. An action that reads a client path (the wheelhouse under ~/.cache, the Pants venv's
interpreter) works here and would fail on a separate worker: the test lists those actions (the
workers report which client paths an action names) and docs/remote-cache.md says why each exists.
Wall times go to stdout for docs/benchmarks.md (run with `--test-output=all`); none is asserted.
"""
from __future__ import annotations

import collections
import glob
import os
import re
import threading
import time
from pathlib import Path

from tests.integration.backend_process import tree_sha256
from tests.integration.remote_execution import Cluster
from tests.integration.temp_repo import MINILM_ENGINE_SOURCES, SILERO_VAD, SILERO_VAD_SOURCES, make_temp_repo, run_pants

TARGETS = (SILERO_VAD, "engines/minilm:avx2")
SOURCES = (*SILERO_VAD_SOURCES, *MINILM_ENGINE_SOURCES, "pants.remote.toml")
OUTPUTS = (
    "dist/backends/silero-vad/cpu",
    "dist/images/silero-vad/cpu",
    "dist/engines/minilm/avx2",
)


def stats(output: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^\s+(\w+): (\d+)$", output, re.MULTILINE)}


def interpreter_dirs() -> list[str]:
    """The folders of the CPython 3.11 and 3.9 that a local build finds through <PYENV> here.

    A worker image would have them at fixed paths (pants.remote.toml says /usr/local/bin,
    /usr/bin); these workers share this machine, so they get this machine's own, which also keeps
    the interpreter the same as the local build's.
    """
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    dirs = []
    for version in ("3.11", "3.9"):
        found = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"), reverse=True)
        assert found, f"CPython {version} not under {root}/versions: `pyenv install {version}`"
        dirs.append(str(Path(found[0]).parent))
    return dirs


def package(repo: Path, cache_root: Path, env: dict[str, str] | None = None):
    start = time.monotonic()
    result = run_pants(
        repo,
        f"--local-store-dir={cache_root}/store",
        f"--named-caches-dir={cache_root}/named",
        "package",
        *TARGETS,
        # Cold ggml took 27 min (instead of ~2.5) on this 2-core machine at load 15-30.
        timeout=3300,
        env=env,
    )
    return result, time.monotonic() - start


def test_remote_execution_on_buildgrid_workers(tmp_path) -> None:
    home_cache = os.path.expanduser("~/.cache/localai-build")
    cluster = Cluster(tmp_path / "cluster", workers=2, client_paths=(home_cache, str(tmp_path)))
    try:
        local = make_temp_repo(tmp_path / "local", SOURCES)
        remote = make_temp_repo(tmp_path / "somewhere/else/remote", SOURCES)
        env = {
            "PANTS_CONFIG_FILES": "+['pants.ci.toml', 'pants.remote.toml']",
            "PANTS_REMOTE_STORE_ADDRESS": cluster.address,
            "PANTS_REMOTE_EXECUTION_ADDRESS": cluster.address,
            "PANTS_PYTHON_BOOTSTRAP_SEARCH_PATH": repr(interpreter_dirs()),
            # A fresh folder for the workers' named caches: the remote build is as cold as the local one.
            "PANTS_REMOTE_EXECUTION_APPEND_ONLY_CACHES_BASE_PATH": str(tmp_path / "worker-named-caches"),
            # See test_remote_cache.py: on a loaded 2-core runner BuildGrid can take longer than 3 s.
            "PANTS_REMOTE_CACHE_RPC_TIMEOUT_MILLIS": "30000",
        }
        # The local reference build (plain pants.toml, its own empty store) runs beside the remote
        # one: the test's cost is the longer of the two, not their sum. Their wall times are
        # therefore not a benchmark (docs/benchmarks.md measures them apart).
        box: dict = {}
        builds = [
            threading.Thread(target=lambda: box.update(local=package(local, tmp_path / "cache-local"))),
            threading.Thread(target=lambda: box.update(remote=package(remote, tmp_path / "cache-remote", env))),
        ]
        for b in builds:
            b.start()
        # Not the engine compile (the longest action): killing it would double the test's cost.
        killed = cluster.kill_mid_action(
            after_actions=8, min_seconds=3, until=lambda: not builds[1].is_alive(),
            spare=lambda argv: any("cmake_driver" in a for a in argv),
        )
        for b in builds:
            b.join()
        (result, local_wall), (remote_result, remote_wall) = box["local"], box["remote"]
        assert result.returncode == 0, result.stdout[-5000:]
        assert remote_result.returncode == 0, remote_result.stdout[-5000:]
        s = stats(remote_result.stdout)
        actions = cluster.actions()
    finally:
        cluster.stop()

    # Everything Pants ran, it ran remotely; and each of those requests is an action a worker ran.
    assert s.get("local_execution_requests", 0) == 0, s
    assert s["remote_execution_requests"] > 0 and s["remote_execution_errors"] == 0, s
    ran = [a for a in actions if a["status"] == 0]
    by_digest = collections.Counter(a["action"] for a in ran)
    assert len(by_digest) == s["remote_execution_requests"], (len(by_digest), s)
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

    # Byte-identical artifacts.
    for folder in OUTPUTS:
        assert tree_sha256(local / folder), folder
        assert tree_sha256(local / folder) == tree_sha256(remote / folder), folder

    client = collections.defaultdict(list)
    for a in ran:
        for p in a["client_paths"]:
            client[p.replace(home_cache, "~/.cache/localai-build").replace(str(tmp_path), "<test tmp>")].append(" ".join(a["argv"][:3]))
    print(f"\nREMOTE-EXECUTION local={local_wall:.1f}s remote={remote_wall:.1f}s ratio={remote_wall / local_wall:.2f} "
          f"pants_remote_requests={s['remote_execution_requests']} worker_actions={len(ran)} per_worker={dict(per_worker)} "
          f"killed={dead.name} while running {' '.join(action['argv'][:3])!r} -> rerun by {rerun[0]['worker']} "
          f"execute_rpcs={s['remote_execution_rpc_execute']} pants_resent={pants_resent} "
          f"pants_rpc_retries={s.get('remote_execution_rpc_retries', 0)}")
    for path, argvs in sorted(client.items()):
        print(f"REMOTE-EXECUTION names client path {path}: {len(argvs)} actions, e.g. {collections.Counter(argvs).most_common(3)}")
