from __future__ import annotations

import pytest

from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from localai.accelerators import AcceleratorMatrix, AcceleratorMatrixError
from localai.testutil import make_rule_runner, repo_file

MATRIX = repo_file("3rdparty/accelerators.toml")


def test_committed_matrix_declares_the_required_accelerators() -> None:
    matrix = AcceleratorMatrix.parse(MATRIX)
    assert {"cpu", "cuda12", "cuda13", "rocm", "intel", "metal"} <= set(matrix.accelerators)
    for name, accel in matrix.accelerators.items():
        if not name.startswith("cuda"):
            # Every non-CUDA accelerator must forbid the CUDA stack.
            assert accel.forbidden_in(["nvidia-cublas", "cuda-toolkit", "triton"]) == (
                "cuda-toolkit",
                "nvidia-cublas",
                "triton",
            ), name
        assert accel.capabilities, name


def test_committed_pip_options_name_the_accelerator_index() -> None:
    # The index is declared in the matrix; its pip options file must give exactly it (or the
    # wheelhouse that mirrors it), so resolves of other accelerators never see it.
    for name, accel in AcceleratorMatrix.parse(MATRIX).accelerators.items():
        options = [l for l in repo_file(accel.pip_options).splitlines() if l and not l.startswith("#")]
        if accel.index.startswith("https://pypi.org"):
            assert options == [], name
        elif name == "cpu":
            assert options == ["--find-links file://${LOCALAI_WHEELHOUSE}/cpu/"]
        else:
            assert options == [f"--extra-index-url {accel.index}"], name


def test_forbidden_globs_match_case_insensitively_and_only_whole_names() -> None:
    cpu = AcceleratorMatrix.parse(MATRIX).accelerators["cpu"]
    assert cpu.forbidden_in(["NVIDIA-cudnn-cu13", "torch", "pytorch-triton-rocm", "triton"]) == (
        "NVIDIA-cudnn-cu13",
        "triton",
    )


def test_unknown_accelerator_names_the_context_and_the_known_ones() -> None:
    matrix = AcceleratorMatrix.parse(MATRIX)
    with pytest.raises(AcceleratorMatrixError) as e:
        matrix.get("gpu", context="backends/x/BUILD (backends/x:gpu)")
    msg = str(e.value)
    assert "backends/x/BUILD" in msg and "'gpu'" in msg and "cpu, cuda12, cuda13" in msg


def test_incomplete_entry_is_rejected_with_the_missing_keys() -> None:
    with pytest.raises(AcceleratorMatrixError, match=r"\[tpu\] lacks .*forbidden"):
        AcceleratorMatrix.parse('[tpu]\nindex = "x"\npip_options = "y"\ncapabilities = []\nplatforms = []\npython = "CPython==3.11.*"\nsize_budget_mb = 1\n')


def test_rule_loads_the_matrix_from_the_build_root() -> None:
    rule_runner = make_rule_runner(QueryRule(AcceleratorMatrix, []))
    rule_runner.write_files({"3rdparty/accelerators.toml": MATRIX})
    matrix = rule_runner.request(AcceleratorMatrix, [])
    assert matrix.accelerators["cuda13"].capabilities == ("nvidia", "nvidia-cuda-13")


def test_rule_fails_clearly_without_the_matrix() -> None:
    rule_runner = make_rule_runner(QueryRule(AcceleratorMatrix, []))
    with pytest.raises(ExecutionError, match="3rdparty/accelerators.toml is missing"):
        rule_runner.request(AcceleratorMatrix, [])
