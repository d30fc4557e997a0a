import types

import pytest

from backends.common.device import select_device, select_device_and_dtype, select_dtype_name
from backends.common.errors import FailedPrecondition, InvalidArgument


def fake_torch(cuda=False, bf16=False, xpu=None, mps=False):
    t = types.SimpleNamespace(float32="f32", float16="f16", bfloat16="bf16")
    t.cuda = types.SimpleNamespace(is_available=lambda: cuda, is_bf16_supported=lambda: bf16)
    if xpu is not None:
        t.xpu = types.SimpleNamespace(is_available=lambda: xpu)
    t.backends = types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: mps))
    return t


def test_cpu_default_is_float32():
    assert select_device_and_dtype(fake_torch(), environ={}, system="Linux") == ("cpu", "f32")


def test_cuda_bf16_when_supported_else_fp16():
    assert select_device_and_dtype(fake_torch(cuda=True, bf16=True), environ={}, system="Linux") == ("cuda", "bf16")
    assert select_device_and_dtype(fake_torch(cuda=True, bf16=False), environ={}, system="Linux") == ("cuda", "f16")


def test_xpu_only_when_torch_reports_it(tmp_path, monkeypatch):
    # A torch without an xpu attribute, or with xpu unavailable, never yields xpu.
    assert select_device(fake_torch(), environ={}, system="Linux") == "cpu"
    assert select_device(fake_torch(xpu=False), environ={}, system="Linux") == "cpu"
    assert select_device(fake_torch(xpu=True), environ={}, system="Linux") == "xpu"


def test_mps_only_on_macos():
    assert select_device(fake_torch(mps=True), environ={}, system="Darwin") == "mps"
    assert select_device(fake_torch(mps=True), environ={}, system="Linux") == "cpu"


def test_env_override_device_must_be_available():
    assert select_device(fake_torch(cuda=True), environ={"LOCALAI_DEVICE": "cpu"}, system="Linux") == "cpu"
    with pytest.raises(FailedPrecondition):
        select_device(fake_torch(), environ={"LOCALAI_DEVICE": "cuda"}, system="Linux")
    with pytest.raises(InvalidArgument):
        select_device(fake_torch(), environ={"LOCALAI_DEVICE": "tpu"}, system="Linux")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "fp16", "bf16"])
def test_cpu_refuses_half_precision(dtype):
    with pytest.raises(InvalidArgument, match="deadlock diffusers"):
        select_dtype_name(fake_torch(), "cpu", dtype, environ={})
    with pytest.raises(InvalidArgument):
        select_dtype_name(fake_torch(), "cpu", None, environ={"LOCALAI_DTYPE": dtype})


def test_explicit_dtype_on_gpu_and_request_beats_env():
    t = fake_torch(cuda=True, bf16=True)
    assert select_dtype_name(t, "cuda", "float32", environ={"LOCALAI_DTYPE": "float16"}) == "float32"
    assert select_dtype_name(t, "cuda", "", environ={"LOCALAI_DTYPE": "float16"}) == "float16"
    with pytest.raises(InvalidArgument):
        select_dtype_name(t, "cuda", "int3", environ={})
