"""The linux/arm64 minilm engine, cross-compiled on x86_64 by `pants package
engines/minilm:arm64-neon`, loaded by an aarch64 CPython 3.11 under qemu-aarch64-static through
the engine's own ctypes binding (engines/minilm/binding.py, the one the backend uses): its
embeddings equal the x86_64 build's (cosine > 0.9999 per text), and the runtime on the emulated
aarch64 picks an arm64 level from the table. Timings under emulation are emulation's."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from engines.minilm.binding import Library
from engines.minilm.convert import convert, default_model_dir
from tests.integration.aarch64_python import python_argv

ARM = Path("engines/minilm/arm64-neon")
X86 = Path("engines/minilm/fallback")
TEXTS = ["The quick brown fox jumps over the lazy dog.", "LocalAI runs models on arm64 too.",
         "Emulated, not native: qemu-user translates every instruction.", "ok"]

# Run by the aarch64 interpreter: the repository's binding (stdlib only) on the arm64 library.
EMBED = """
import json, platform, sys
sys.path.insert(0, sys.argv[1])
from backends.common import cpu_levels
from engines.minilm.binding import Library
model = Library(sys.argv[2]).load(sys.argv[3], n_threads=1)
print(json.dumps({"machine": platform.machine(), "levels": list(cpu_levels.CPU_LEVELS),
                  "picked": cpu_levels.pick_level(list(cpu_levels.CPU_LEVELS), "NO_SUCH_OVERRIDE"),
                  "embeddings": model.embed(json.loads(sys.argv[4]))}))
"""


def elf_machine(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[18:20], "little")


def test_arm64_engine_under_qemu_embeds_like_the_x86_64_build(tmp_path):
    arm_lib, x86_lib = ARM / "libminilm.so", X86 / "libminilm.so"
    assert elf_machine(arm_lib) == 183 and elf_machine(x86_lib) == 62  # EM_AARCH64, EM_X86_64
    record = json.loads((ARM / "build-record.json").read_text())
    assert (record["platform"], record["target"], record["cpu_level"]) == ("aarch64", "aarch64-linux-gnu.2.28", "arm64-neon")
    # ggml's armv8-a variant, handed to ggml in zig's spelling (cmake_driver.zig_arm_cpu).
    assert (record["ggml_arm_march"], record["ggml_cmake_options"]["GGML_CPU_ARM_ARCH"]) == ("armv8-a", "generic")

    gguf = tmp_path / "minilm-f32.gguf"
    convert(default_model_dir(), gguf, "f32")
    expected = np.asarray(Library(x86_lib).load(gguf, n_threads=1).embed(TEXTS), dtype=np.float64)

    script = tmp_path / "embed.py"
    script.write_text(EMBED)
    run = subprocess.run([*python_argv(), str(script), str(Path.cwd()), str(arm_lib.resolve()), str(gguf),
                          json.dumps(TEXTS)], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(run.stdout)
    assert out["machine"] == "aarch64"
    assert out["levels"] == ["arm64-i8mm", "arm64-sve", "arm64-dotprod", "arm64-neon"]
    # qemu-user shows the host's /proc/cpuinfo (no `Features` line): only the baseline qualifies.
    assert out["picked"] == "arm64-neon"
    got = np.asarray(out["embeddings"], dtype=np.float64)
    assert got.shape == expected.shape == (len(TEXTS), 384)
    cos = (got * expected).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
    print({"cosine": cos.tolist(), "max_abs_diff": float(np.abs(got - expected).max())}, file=sys.stderr)
    assert (cos > 0.9999).all(), cos
