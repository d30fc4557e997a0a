"""Device and dtype selection for torch backends.

torch is imported lazily (``import_torch``); the selection functions take the torch module as
a parameter so the GPU branches can be tested with a fake object on a machine without GPUs.

Environment overrides: ``LOCALAI_DEVICE`` (cpu|cuda|xpu|mps), ``LOCALAI_DTYPE``
(float32|float16|bfloat16). Intel XPU is chosen only when torch itself reports it
(``torch.xpu.is_available()``), never from files on disk such as /opt/intel.
"""

import os
import platform
from typing import Optional, Tuple

from .errors import FailedPrecondition, InvalidArgument

DEVICES = ("cpu", "cuda", "xpu", "mps")
DTYPES = ("float32", "float16", "bfloat16")
_DTYPE_ALIASES = {
    "fp32": "float32", "float": "float32", "float32": "float32",
    "fp16": "float16", "half": "float16", "float16": "float16",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "": "", "auto": "",
}

CPU_HALF_REFUSED = (
    "dtype {dtype} is refused on CPU: float16/bfloat16 deadlock diffusers (and run slowly or "
    "fail elsewhere) on CPU; use float32 or unset LOCALAI_DTYPE / DType"
)


def import_torch():
    import torch  # lazy on purpose

    return torch


def _xpu_available(torch) -> bool:
    xpu = getattr(torch, "xpu", None)
    if xpu is None:
        return False
    try:
        return bool(xpu.is_available())
    except Exception:  # a broken XPU runtime means "no XPU"
        return False


def _cuda_available(torch) -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _mps_available(torch, system: str) -> bool:
    if system != "Darwin":
        return False
    backends = getattr(torch, "backends", None)
    mps = getattr(backends, "mps", None) if backends is not None else None
    try:
        return bool(mps is not None and mps.is_available())
    except Exception:
        return False


def device_available(torch, device: str, system: Optional[str] = None) -> bool:
    system = platform.system() if system is None else system
    if device == "cpu":
        return True
    if device == "cuda":
        return _cuda_available(torch)
    if device == "xpu":
        return _xpu_available(torch)
    if device == "mps":
        return _mps_available(torch, system)
    return False


def select_device(torch, environ=None, system: Optional[str] = None) -> str:
    """cuda > xpu > mps > cpu, unless LOCALAI_DEVICE names one (which must be available)."""
    environ = os.environ if environ is None else environ
    system = platform.system() if system is None else system
    override = environ.get("LOCALAI_DEVICE", "").strip().lower()
    if override:
        if override not in DEVICES:
            raise InvalidArgument(
                f"LOCALAI_DEVICE={override!r} is not one of {', '.join(DEVICES)}"
            )
        if not device_available(torch, override, system):
            raise FailedPrecondition(
                f"LOCALAI_DEVICE={override} but torch reports no {override} device available"
            )
        return override
    for device in ("cuda", "xpu", "mps"):
        if device_available(torch, device, system):
            return device
    return "cpu"


def normalize_dtype(name: Optional[str]) -> str:
    key = (name or "").strip().lower()
    if key not in _DTYPE_ALIASES:
        raise InvalidArgument(f"dtype {name!r} is not one of {', '.join(DTYPES)}")
    return _DTYPE_ALIASES[key]


def select_dtype_name(torch, device: str, requested: Optional[str] = None, environ=None) -> str:
    """Name of the dtype to use on ``device``.

    ``requested`` (e.g. ModelOptions.DType) wins over LOCALAI_DTYPE. CPU is always float32 and
    refuses an explicit float16/bfloat16. CUDA defaults to bfloat16 when supported, else
    float16; XPU defaults to bfloat16; MPS to float16.
    """
    environ = os.environ if environ is None else environ
    explicit = normalize_dtype(requested) or normalize_dtype(environ.get("LOCALAI_DTYPE", ""))
    if device == "cpu":
        if explicit in ("float16", "bfloat16"):
            raise InvalidArgument(CPU_HALF_REFUSED.format(dtype=explicit))
        return "float32"
    if explicit:
        return explicit
    if device == "cuda":
        try:
            bf16 = bool(torch.cuda.is_bf16_supported())
        except Exception:
            bf16 = False
        return "bfloat16" if bf16 else "float16"
    if device == "xpu":
        return "bfloat16"
    if device == "mps":
        return "float16"
    return "float32"


def select_device_and_dtype(
    torch=None, requested_dtype: Optional[str] = None, environ=None, system: Optional[str] = None
) -> Tuple[str, object]:
    """(device string, torch dtype object) for the current machine."""
    torch = import_torch() if torch is None else torch
    device = select_device(torch, environ=environ, system=system)
    name = select_dtype_name(torch, device, requested_dtype, environ=environ)
    return device, getattr(torch, name)
