"""A backend variant's engines must be built for its platform: the arm64 variant carries the
engines' aarch64 builds (`arm64_engines`), and `pants package` refuses an engine built for the
other machine before building anything, naming the variant, the engine and the fix. The real
macro, targets and rule in RuleRunner (no engine is built: the refusal comes first)."""
from __future__ import annotations

import pytest
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from localai.model.accelerators import MATRIX_PATH
from localai.native.cpu_levels import TABLE_PATH
from localai.package.sources import EngineArtifacts, EngineArtifactsRequest
from localai.testutil import make_rule_runner, repo_file

ENGINE = 'localai_engine(library="libx.so", header="x.h", ggml_archive="3rdparty/native:ggml", cpu_levels=["avx2", "arm64-neon"], fuzz=False)\n'


def _runner(backend_build: str):
    rule_runner = make_rule_runner(QueryRule(EngineArtifacts, [EngineArtifactsRequest]))
    rule_runner.write_files({
        TABLE_PATH: repo_file(TABLE_PATH),
        MATRIX_PATH: repo_file(MATRIX_PATH),
        "3rdparty/native/BUILD": 'file(name="ggml", source="ggml.tar.gz")\n',
        "3rdparty/native/ggml.tar.gz": "",
        "engines/x/BUILD": ENGINE,
        "engines/x/CMakeLists.txt": "",
        "backends/demo/BUILD": backend_build,
        "backends/demo/backend.py": "",
        "backends/demo/requirements.txt": "",
        "backends/demo/requirements-cpu.txt": "",
        "backends/demo/requirements-cpu-arm64.txt": "",
    })
    return rule_runner


def test_an_engine_of_the_other_machine_is_refused_naming_variant_engine_and_fix() -> None:
    rule_runner = _runner('localai_backend(accelerators=["cpu"], engines=["engines/x:avx2"], arm64=["cpu"], '
                          'arm64_engines=["engines/x:avx2"])\n')
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(EngineArtifacts, [EngineArtifactsRequest(Address("backends/demo", target_name="cpu-arm64"), "aarch64")])
    assert ("backends/demo:cpu-arm64: runs on aarch64, but its engines include engines/x:avx2 (cpu_level avx2: x86_64)"
            in str(e.value)) and "`arm64_engines=[...]` for aarch64" in str(e.value)
    # And the reverse: an aarch64 build among the x86_64 variant's engines.
    rule_runner = _runner('localai_backend(accelerators=["cpu"], engines=["engines/x:avx2", "engines/x:arm64-neon"], '
                          'arm64=["cpu"], arm64_engines=["engines/x:arm64-neon"])\n')
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(EngineArtifacts, [EngineArtifactsRequest(Address("backends/demo", target_name="cpu"), "x86_64")])
    assert "backends/demo:cpu: runs on x86_64, but its engines include engines/x:arm64-neon (cpu_level arm64-neon: aarch64)" in str(e.value)
    assert "engines/x:avx2" not in str(e.value).split("Fix:")[0]

def test_an_arm64_variant_of_a_backend_with_engines_needs_their_aarch64_builds() -> None:
    rule_runner = _runner('localai_backend(accelerators=["cpu"], engines=["engines/x:avx2"], arm64=["cpu"])\n')
    with pytest.raises(ExecutionError, match=r"backends/demo/BUILD: localai_backend\(\.\.\.\): arm64=\[\.\.\.\] with engines=\[\.\.\.\] needs arm64_engines"):
        rule_runner.get_target(Address("backends/demo", target_name="cpu-arm64"))
