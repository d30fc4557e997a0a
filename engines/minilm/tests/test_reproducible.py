"""A clean ggml + engine build (one CPU level) in another directory, with a path holding spaces,
its own empty zig cache and failing cc/gcc/g++/ld/... first on PATH, gives the library
`pants package engines/minilm:<level>` built in its sandbox, bit for bit: two builds that share
no directory, cache or host tool agree. This build compiles ggml's three libraries in one process
(the driver's `ggml --part all`), Pants in two (ggml-base per platform, ggml-cpu per level): the
identity also proves the split changes no byte.

The level is MINILM_REPRODUCIBLE_LEVEL (the test target's extra_env_vars): `fallback` in CI,
`arm64-neon` (cross-compiled for aarch64) by hand.

Runs in the `native-toolchain` resolve: the same zig/cmake/ninja the Pants rule uses."""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path.cwd()
DRIVER = ROOT / "pants-plugins/localai/native/scripts/cmake_driver.py"
SDIST = ROOT / "3rdparty/native/llama_cpp_python-0.3.36.tar.gz"
ENGINE = ROOT / "engines/minilm"
CPU_LEVELS = ROOT / "backends/common/cpu_levels.json"
LEVEL = os.environ.get("MINILM_REPRODUCIBLE_LEVEL", "fallback")
HOSTILE_TOOLS = ("cc", "gcc", "g++", "c++", "clang", "clang++", "ld", "ld.lld", "ar", "ranlib", "strip",
                 "as", "cmake", "ninja", "make", "git")


def build(workdir: Path, zig_cache: Path, path_env: str) -> str:
    src = workdir / "source with spaces" / "minilm"
    shutil.copytree(ENGINE, src, ignore=shutil.ignore_patterns("tests", "*.py", "BUILD"))
    shutil.copytree(ENGINE / "tests", src / "tests", ignore=shutil.ignore_patterns("*.py"))
    env = {"PATH": path_env, "HOME": str(workdir), "ZIG_GLOBAL_CACHE_DIR": str(zig_cache)}
    def run(*a, cwd):
        return subprocess.run([sys.executable, str(DRIVER), *a], cwd=cwd, env=env, check=True, capture_output=True, text=True, timeout=1500)

    (workdir / "g").mkdir()
    level = ("--cpu-levels", str(CPU_LEVELS), "--cpu-level", LEVEL)
    run("ggml", "--sdist", str(SDIST), *level, "--out", "ggml-out", cwd=workdir / "g")
    (workdir / "e").mkdir()
    artifacts = ("--artifact", "libminilm.so", "--artifact", "minilm_tests")
    run("engine", "--src", str(src), "--ggml", str(workdir / "g" / "ggml-out"), *level, "--out", "out", *artifacts, cwd=workdir / "e")
    return hashlib.sha256((workdir / "e" / "out" / "libminilm.so").read_bytes()).hexdigest()


def test_bit_identical_and_no_host_tools(tmp_path):
    assert DRIVER.is_file() and SDIST.is_file() and CPU_LEVELS.is_file() and (ENGINE / "CMakeLists.txt").is_file()
    hostile = tmp_path / "hostile-bin"
    hostile.mkdir()
    marker = tmp_path / "host-tool-called"
    for tool in HOSTILE_TOOLS:
        p = hostile / tool
        p.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{marker}"\nexit 1\n')
        p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    packaged = Path(f"engines/minilm/{LEVEL}/libminilm.so")  # runtime_package_dependencies of this test
    assert packaged.is_file(), f"{packaged} is missing: this test's BUILD target must package engines/minilm:{LEVEL}"
    path = f"{hostile}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    clean = build(tmp_path / "b" / "deeper" / "build", tmp_path / "zig-cache", path)
    assert not marker.exists(), marker.read_text()
    assert hashlib.sha256(packaged.read_bytes()).hexdigest() == clean, "a clean build differs from `pants package`"
    print({"level": LEVEL, "sha256": clean})
