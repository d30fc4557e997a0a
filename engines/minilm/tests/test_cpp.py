"""Runs the C++ unit tests (tests/minilm_tests.cpp), built by the same native rule as the
library (engines/minilm:avx2-cpptests), with a converted model."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from minilm_ctypes import supported  # pants: no-infer-dep


@pytest.mark.skipif(not supported("avx2"), reason="the C++ test binary is built for avx2")
def test_cpp_unit_tests(gguf_models, tmp_path):
    exe = Path("engines/minilm/avx2-cpptests/minilm_tests").resolve()
    assert exe.is_file(), "run via `pants test` (runtime_package_dependencies builds it)"
    r = subprocess.run([str(exe), str(gguf_models["q8_0"])], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    assert " 0 failed" in r.stdout
