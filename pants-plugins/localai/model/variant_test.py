from __future__ import annotations

import pytest
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from localai.model.variant import Variant, VariantRequest
from localai.testutil import backend_files, make_rule_runner, resolve_options


def _runner():
    return make_rule_runner(QueryRule(Variant, [VariantRequest]))


def test_variant_names_follow_from_folder_and_accelerator() -> None:
    rule_runner = _runner()
    rule_runner.write_files(backend_files("faster-whisper", {"cpu": ""}))
    rule_runner.set_options(resolve_options("faster-whisper", ["cpu"]))
    v = rule_runner.request(Variant, [VariantRequest(Address("backends/faster-whisper", target_name="cpu"), "cpu")])
    assert (v.backend, v.resolve, v.lockfile) == ("faster-whisper", "faster-whisper-cpu", "lockfiles/faster-whisper-cpu.lock")
    assert v.accelerator.capabilities == ("default", "cpu")


def test_unknown_accelerator_in_a_build_file_names_the_target() -> None:
    rule_runner = _runner()
    rule_runner.write_files(backend_files("demo", {"gpu": ""}))
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(Variant, [VariantRequest(Address("backends/demo", target_name="gpu"), "gpu")])
    assert "backends/demo/BUILD (backends/demo:gpu): unknown accelerator 'gpu'" in str(e.value)


def test_resolve_missing_from_pants_toml_prints_the_lines_to_add() -> None:
    rule_runner = _runner()
    rule_runner.write_files(backend_files("demo", {"rocm": ""}))
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(Variant, [VariantRequest(Address("backends/demo", target_name="rocm"), "rocm")])
    msg = str(e.value)
    assert "[python.resolves] lacks it" in msg
    assert '"demo-rocm" = "lockfiles/demo-rocm.lock"' in msg
    assert '"demo-rocm" = "3rdparty/accelerators/rocm.txt"' in msg


def test_resolve_with_another_accelerators_index_is_refused() -> None:
    # Index isolation: a cuda13 resolve given the CPU wheelhouse could lock torch+cpu.
    rule_runner = _runner()
    rule_runner.write_files(backend_files("demo", {"cuda13": ""}))
    rule_runner.set_options(resolve_options("demo", ["cuda13"], matrix_pip={"cuda13": "3rdparty/accelerators/cpu.txt"}))
    with pytest.raises(ExecutionError, match="not the accelerator's pip options '3rdparty/accelerators/cuda13.txt'"):
        rule_runner.request(Variant, [VariantRequest(Address("backends/demo", target_name="cuda13"), "cuda13")])
