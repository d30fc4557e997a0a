"""backends/minilm-ggml:cpu-arm64, cross-built on x86_64 by `pants package` (the PEX for the
aarch64 complete platform, libminilm.so cross-compiled with zig for aarch64-linux-gnu.2.28 at
ggml's ARM levels), served by an aarch64 CPython 3.11 under qemu-aarch64-static through its run.sh,
as LocalAI starts it, and called over gRPC next to the x86_64 build (minilm-ggml:cpu): the same
all-MiniLM-L6-v2 embeddings (cosine > 0.9999 per text), from the baseline the runtime picks under
qemu-user and from each other ARM level, forced (LOCALAI_MINILM_CPU) on qemu's `max` CPU, which
implements dotprod, fp16, SVE and i8mm: every ARM level the backend ships runs here. Timings under
emulation are emulation's."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from backends.proto import backend_pb2
from tests.integration.aarch64_python import ARM_LEVELS, aarch64_engine_builds, emulated_env, python_argv, served_beside_x86_64
from tests.integration.backend_process import BackendProcess
from tests.integration.rpc_checks import assert_healthy
from tests.integration.tiny_models import minilm_gguf

TEXTS = ["The quick brown fox jumps over the lazy dog.", "LocalAI runs models on arm64 too.",
         "Emulated, not native: qemu-user translates every instruction.", "ok"]
EMULATED = 900  # seconds

# Run by the aarch64 interpreter: the runtime's own level choice (stdlib only).
LEVELS = """
import json, platform, sys
sys.path.insert(0, sys.argv[1])
from backends.common import cpu_levels
print(json.dumps({"machine": platform.machine(), "levels": list(cpu_levels.CPU_LEVELS),
                  "picked": cpu_levels.pick_level(list(cpu_levels.CPU_LEVELS), "NO_SUCH_OVERRIDE")}))
"""


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    return minilm_gguf(tmp_path_factory.mktemp("gguf"))


@pytest.fixture(scope="module")
def servers(tmp_path_factory, gguf):
    with served_beside_x86_64("minilm-ggml", tmp_path_factory.mktemp("qemu-bin"), EMULATED,
                              load=backend_pb2.ModelOptions(Model=str(gguf))) as pair:
        yield pair


def loaded_level(server: BackendProcess) -> str:
    """The level whose libminilm.so the server's process has mapped (qemu-user maps the guest's files)."""
    found = {level for level in ARM_LEVELS if f"/{level}/libminilm.so" in Path(f"/proc/{server.proc.pid}/maps").read_text()}
    assert len(found) == 1, (found, server.output())
    return found.pop()


def assert_embeds_as(arm: BackendProcess, x86: BackendProcess) -> None:
    for text in TEXTS:
        a, b = (np.asarray(s.stub.Embedding(backend_pb2.PredictOptions(Embeddings=text), timeout=EMULATED).embeddings,
                           dtype=np.float64) for s in (arm, x86))
        assert a.shape == b.shape == (384,)
        cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        print({"text": text, "cosine": cos, "max_abs_diff": float(np.abs(a - b).max())})
        assert cos > 0.9999, (text, cos)


def test_the_arm64_folder_carries_every_arm_level_as_aarch64_builds():
    builds = aarch64_engine_builds("minilm-ggml", "minilm", "libminilm.so")
    # What the backend ships is what this test runs: every ARM level (no [localai-native].cpu_levels in CI).
    assert set(builds) == set(ARM_LEVELS), sorted(builds)
    for level, folder in builds.items():
        engine = json.loads((folder / "build-record.json").read_text())
        assert (engine["platform"], engine["target"], engine["cpu_level"]) == ("aarch64", "aarch64-linux-gnu.2.28", level)
    # ggml's armv8-a variant, handed to ggml in zig's spelling (cmake_driver.zig_arm_cpu).
    neon = json.loads((builds["arm64-neon"] / "build-record.json").read_text())
    assert (neon["ggml_arm_march"], neon["ggml_cmake_options"]["GGML_CPU_ARM_ARCH"]) == ("armv8-a", "generic")


def test_the_emulated_runtime_lists_the_arm64_levels_and_picks_the_baseline(tmp_path):
    script = tmp_path / "levels.py"
    script.write_text(LEVELS)
    run = subprocess.run([*python_argv(), str(script), str(Path.cwd())], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(run.stdout)
    assert (out["machine"], out["levels"]) == ("aarch64", list(ARM_LEVELS))
    # qemu-user shows the host's /proc/cpuinfo (no `Features` line): only the baseline qualifies.
    assert out["picked"] == "arm64-neon"


def test_embeddings_over_grpc_equal_the_x86_64_build(servers):
    arm, x86 = servers
    assert loaded_level(arm) == "arm64-neon"
    assert_embeds_as(arm, x86)
    assert_healthy(arm.stub)


@pytest.mark.parametrize("level", [level for level in ARM_LEVELS if level != "arm64-neon"])
def test_each_arm_level_forced_on_qemus_max_cpu_embeds_as_the_x86_64_build(level, servers, gguf, tmp_path):
    _, x86 = servers
    env = {**emulated_env(tmp_path / "qemu-bin"), "QEMU_CPU": "max", "LOCALAI_MINILM_CPU": level}
    arm = BackendProcess("minilm-ggml", "cpu-arm64", env=env)
    try:
        arm.wait_healthy(timeout=EMULATED)
        res = arm.stub.LoadModel(backend_pb2.ModelOptions(Model=str(gguf)), timeout=EMULATED)
        assert res.success, res.message + arm.output()
        assert loaded_level(arm) == level
        assert_embeds_as(arm, x86)
    finally:
        arm.stop()
