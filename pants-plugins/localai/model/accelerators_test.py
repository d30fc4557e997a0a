from __future__ import annotations

import pytest
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from localai.model.accelerators import ACCELERATOR_KEYS, AcceleratorMatrix, AcceleratorMatrixError, python_version_of
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
    assert cpu.forbidden_in(["NVIDIA-cudnn-cu13", "torch", "tritonclient", "triton"]) == (
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


def test_name_globs_catch_gpu_packages_that_are_not_nvidia() -> None:
    matrix = AcceleratorMatrix.parse(MATRIX).accelerators
    gpu_names = ["onnxruntime-gpu", "cupy-cuda12x", "cupy-cuda13x", "pytorch-triton", "jax-cuda13-plugin"]
    for name in ("cpu", "metal"):
        assert matrix[name].forbidden_in(gpu_names + ["onnxruntime", "cupy"]) == tuple(sorted(gpu_names)), name
    # ROCm torch needs pytorch-triton-rocm, XPU torch pytorch-triton-xpu: each allows its own only.
    assert matrix["rocm"].forbidden_in(["pytorch-triton-rocm", "pytorch-triton", "pytorch-triton-xpu"]) == (
        "pytorch-triton",
        "pytorch-triton-xpu",
    )
    assert matrix["intel"].forbidden_in(["pytorch-triton-xpu", "pytorch-triton-rocm"]) == ("pytorch-triton-rocm",)


def test_cuda12_refuses_cuda13_wheels_that_carry_no_cu13_suffix() -> None:
    cuda12 = AcceleratorMatrix.parse(MATRIX).accelerators["cuda12"]
    cuda13_wheels = [
        ("nvidia-cublas", "13.0.0.19"),  # CUDA 13's packaging has no -cu13 suffix
        ("nvidia-cufft", "12.0.0.15"),  # ... even where its own version is 12
        ("cuda-toolkit", "13.0.3"),
        ("cuda-bindings", "13.0.1"),
        ("nvidia-cudnn-cu13", "9.13.0.50"),
    ]
    cuda12_wheels = [
        ("nvidia-cublas-cu12", "12.6.4.1"),
        ("nvidia-cudnn-cu12", "9.10.2.21"),
        ("cuda-toolkit", "12.8.1"),
        ("cuda-bindings", "12.9.2"),
        ("nvidia-ml-py", "13.580.82"),
        ("torch", "2.13.0+cu126"),
    ]
    assert cuda12.forbidden_in(cuda13_wheels + cuda12_wheels) == tuple(sorted(n for n, _ in cuda13_wheels))


def test_cuda13_refuses_cuda12_wheels() -> None:
    cuda13 = AcceleratorMatrix.parse(MATRIX).accelerators["cuda13"]
    assert cuda13.forbidden_in(
        [("nvidia-cublas-cu12", "12.6.4.1"), ("cuda-toolkit", "12.8.1"), ("nvidia-cublas", "13.0.0.19"), ("nvidia-cudnn-cu13", "9.13.0.50")]
    ) == ("cuda-toolkit", "nvidia-cublas-cu12")


def test_gpu_runtime_allow_lists() -> None:
    matrix = AcceleratorMatrix.parse(MATRIX).accelerators
    needed = ["libc.so.6", "libtorch_cpu.so", "libcudart.so.13", "libc10_cuda.so", "libamdhip64.so.7", "libcublasLt.so.12"]
    assert matrix["cpu"].gpu_libs_in(needed) == ("libamdhip64.so.7", "libc10_cuda.so", "libcublasLt.so.12", "libcudart.so.13")
    assert matrix["rocm"].gpu_libs_in(needed) == ("libc10_cuda.so", "libcublasLt.so.12", "libcudart.so.13")
    assert matrix["cuda12"].gpu_libs_in(needed) == ("libamdhip64.so.7", "libcudart.so.13")
    assert matrix["cuda13"].gpu_libs_in(needed) == ("libamdhip64.so.7", "libcublasLt.so.12")
    assert matrix["cpu"].gpu_libs_in(["libgomp.so.1", "libstdc++.so.6", "libcudnn_ops.so.9"]) == ("libcudnn_ops.so.9",)


def test_auditwheel_mangled_sonames_are_recognised() -> None:
    matrix = AcceleratorMatrix.parse(MATRIX).accelerators
    # torchvision 0.28.0's image.so (PyPI) NEEDs the vendored, renamed CUDA runtime.
    needed = ["libcudart.faf08d9a.so.13", "libcublas-1a2b3c4d.so.12", "libz-a147dcb0.so.1.2.3"]
    assert matrix["cpu"].gpu_libs_in(needed) == ("libcublas-1a2b3c4d.so.12", "libcudart.faf08d9a.so.13")
    assert matrix["cuda13"].gpu_libs_in(needed) == ("libcublas-1a2b3c4d.so.12",)


def test_python_version_of_the_accelerator_constraint() -> None:
    assert python_version_of("CPython==3.11.*") == "3.11"
    with pytest.raises(AcceleratorMatrixError, match=r"3rdparty/accelerators.toml: .* does not name one CPython X.Y"):
        python_version_of("CPython>=3.10")


# One wrong value per key of an accelerator's table: (key, TOML value, text the error must hold).
# Every error names the file, the key, what was expected and a fix with a right value.
GOOD_TPU = {
    "description": '"a test accelerator"',
    "index": '"https://pypi.org/simple"',
    "pip_options": '"3rdparty/accelerators/tpu.txt"',
    "capabilities": '["tpu"]',
    "platforms": '["linux_x86_64"]',
    "forbidden": '["nvidia-*"]',
    "allowed_gpu_libs": "[]",
    "system_libs": '["libcuda.so.1"]',
    "python": '"CPython==3.11.*"',
    "size_budget_mb": "600",
    "lock_note": '"unreachable"',
}
WRONG_VALUES = [
    ("description", "3", "expected a string"),
    ("index", '""', "expected the URL of the accelerator's package index"),
    ("index", '["https://pypi.org/simple"]', "expected the URL"),
    ("pip_options", "true", "expected the path of its pip options file"),
    ("capabilities", '"cpu"', "expected a non-empty list of LocalAI capability keys"),
    ("capabilities", "[]", "expected a non-empty list"),
    ("capabilities", "[1, 2]", "expected a non-empty list"),
    ("platforms", '"linux_x86_64"', "expected a non-empty list of wheel platform tags"),
    ("platforms", '["linux-x86_64"]', "expected a non-empty list of wheel platform tags"),
    ("forbidden", '"nvidia-*"', "expected a list of project globs"),
    ("allowed_gpu_libs", '"libcuda.so*"', "expected a list of soname globs"),
    ("system_libs", "[1]", "expected a list of sonames"),
    ("python", '"3.11"', 'expected the interpreter constraint "CPython==X.Y.*"'),
    ("python", "3.11", "expected the interpreter constraint"),
    ("size_budget_mb", '"big"', "expected a whole number of megabytes greater than 0"),
    ("size_budget_mb", "0", "expected a whole number of megabytes greater than 0"),
    ("size_budget_mb", "60.5", "expected a whole number"),
    ("size_budget_mb", "true", "expected a whole number"),
    ("lock_note", '["x"]', "expected a string"),
]


def _tpu(**values: str) -> str:
    return "[tpu]\n" + "".join(f"{k} = {v}\n" for k, v in {**GOOD_TPU, **values}.items())


def test_every_key_of_a_good_table_is_read() -> None:
    tpu = AcceleratorMatrix.parse(_tpu(), "m.toml").accelerators["tpu"]
    assert (tpu.capabilities, tpu.platforms, tpu.size_budget_mb, tpu.system_libs) == (
        ("tpu",), ("linux_x86_64",), 600, ("libcuda.so.1",)
    )


def test_table_covers_every_key() -> None:
    assert {key for key, _, _ in WRONG_VALUES} == set(ACCELERATOR_KEYS) == set(GOOD_TPU)


@pytest.mark.parametrize("key,value,expected", WRONG_VALUES)
def test_a_wrong_value_names_the_file_the_key_what_was_expected_and_the_fix(key: str, value: str, expected: str) -> None:
    with pytest.raises(AcceleratorMatrixError) as e:
        AcceleratorMatrix.parse(_tpu(**{key: value}), "m.toml")
    msg = str(e.value)
    assert msg.startswith(f"m.toml: [tpu] {key} = "), msg
    example = ACCELERATOR_KEYS[key][2]
    assert expected in msg and f"Write e.g. `{key} = {example}` in [tpu]." in msg, msg
    assert AcceleratorMatrix.parse(_tpu(**{key: example}), "m.toml").accelerators["tpu"], "the fix's example is right"
    assert e.value.file == "m.toml" and e.value.fix and key in e.value.fix


def test_unknown_keys_and_non_tables_are_named() -> None:
    with pytest.raises(AcceleratorMatrixError, match=r"m.toml: accelerator \[tpu\] has unknown key\(s\) size_budget\. "):
        AcceleratorMatrix.parse(_tpu(size_budget="600"), "m.toml")
    with pytest.raises(AcceleratorMatrixError, match=r"m.toml: 'tpu' is 3 \(a number\), .* must be a table\. Write it as a table"):
        AcceleratorMatrix.parse("tpu = 3\n", "m.toml")
