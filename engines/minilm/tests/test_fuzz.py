"""Coverage-guided fuzzing smoke run: each atheris harness (fuzz/fuzz_abi.py) for a short time
against the sanitizer-coverage build (engines/minilm:fuzz). Fails on a crash or a broken
invariant, or if libFuzzer does not see the library's coverage counters or gains no coverage."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest  # pants: no-infer-dep (provided by the pytest runner)

SECONDS = 20
HARNESS = Path(__file__).resolve().parent.parent / "fuzz" / "fuzz_abi.py"
LIB = Path("engines/minilm/fuzz/libminilm.so")


@pytest.mark.parametrize("mode,max_len", [("tokenizer", 8192), ("gguf", 4096)])
def test_fuzz(mode, max_len, gguf_models, tmp_path):
    assert LIB.is_file(), f"{LIB} missing: runtime_package_dependencies should build engines/minilm:fuzz"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    proc = subprocess.run(
        [sys.executable, str(HARNESS), mode, str(LIB.resolve()), str(gguf_models["q8_0"]),
         f"-max_total_time={SECONDS}", f"-max_len={max_len}", "-seed=1", "-artifact_prefix=" + str(tmp_path) + "/",
         str(corpus)],
        capture_output=True, text=True, timeout=SECONDS * 10,
    )
    log = proc.stderr
    assert proc.returncode == 0, f"{mode}: the fuzzer found a failure:\n{log[-4000:]}"
    counters = re.search(r"Loaded 1 modules\s+\((\d+) inline 8-bit counters\)", log)
    assert counters and int(counters.group(1)) > 10000, f"{mode}: library coverage not registered:\n{log[:2000]}"
    inited = int(re.search(r"INITED cov: (\d+)", log).group(1))
    done = int(re.search(r"DONE\s+cov: (\d+)", log).group(1))
    runs = int(re.search(r"Done (\d+) runs", log).group(1))
    print(f"{mode}: {runs} runs in {SECONDS} s, native edge coverage {inited} -> {done}")
    assert done > inited * 2, f"{mode}: coverage did not grow ({inited} -> {done}): not coverage-guided"
