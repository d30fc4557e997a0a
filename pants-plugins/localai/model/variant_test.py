from __future__ import annotations

import pytest
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from localai.model.variant import Variant, VariantRequest
from localai.target_types import PlatformField
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


def _arm64_backend(name: str, arm64: list[str]) -> dict[str, str]:
    files = backend_files(name, {"cpu": "", "rocm": ""})
    files[f"backends/{name}/BUILD"] = f'localai_backend(accelerators=["cpu", "rocm"], arm64={arm64!r})\n'
    files[f"backends/{name}/requirements-cpu-arm64.txt"] = "torch==2.9.1\n"
    return files


def test_arm64_variant_names_carry_the_platform_suffix() -> None:
    rule_runner = _runner()
    rule_runner.write_files(_arm64_backend("demo", ["cpu"]))
    rule_runner.set_options(resolve_options("demo", ["cpu", "cpu-arm64"], matrix_pip={"cpu-arm64": "3rdparty/accelerators/cpu.txt"}))
    tgt = rule_runner.get_target(Address("backends/demo", target_name="cpu-arm64"))
    assert tgt[PlatformField].value == "linux_aarch64"
    v = rule_runner.request(Variant, [VariantRequest(tgt.address, "cpu", "linux_aarch64")])
    assert (v.name, v.resolve, v.lockfile, v.folder, v.entry) == (
        "cpu-arm64", "demo-cpu-arm64", "lockfiles/demo-cpu-arm64.lock", "backends/demo/cpu-arm64", "cpu-arm64-demo"
    )
    # grpcio-tools runs here: from the x86_64 sibling's lock.
    assert v.tool_resolve == "demo-cpu"
    assert (v.platform.machine, v.platform.oci_architecture, v.platforms) == ("aarch64", "arm64", ("linux_aarch64",))
    assert v.accelerator.capabilities == ("default", "cpu")  # LocalAI's capability keys stay the same
    x86 = rule_runner.request(Variant, [VariantRequest(Address("backends/demo", target_name="cpu"), "cpu")])
    assert (x86.name, x86.resolve, x86.platforms) == ("cpu", "demo-cpu", ("linux_x86_64",))


def test_a_platform_the_accelerator_lacks_is_refused_naming_the_matrix() -> None:
    rule_runner = _runner()
    rule_runner.write_files(_arm64_backend("demo", ["cpu"]))
    rule_runner.set_options(resolve_options("demo", ["rocm-arm64"], matrix_pip={"rocm-arm64": "3rdparty/accelerators/rocm.txt"}))
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(Variant, [VariantRequest(Address("backends/demo", target_name="rocm-arm64"), "rocm", "linux_aarch64")])
    assert "the rocm accelerator has no linux_aarch64 builds" in str(e.value)
    assert "3rdparty/accelerators.toml" in str(e.value)


def test_arm64_for_an_undeclared_accelerator_fails_in_the_build_file() -> None:
    rule_runner = _runner()
    rule_runner.write_files(_arm64_backend("demo", ["cuda13"]))
    with pytest.raises(ExecutionError, match=r"backends/demo/BUILD: localai_backend\(...\): arm64=\[...\] names 'cuda13'"):
        rule_runner.get_target(Address("backends/demo", target_name="cpu"))
