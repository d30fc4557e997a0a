"""The accelerator matrix (3rdparty/accelerators.toml) as typed data, loaded through the engine."""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Iterable

import toml  # pants: no-infer-dep (toml comes with pantsbuild.pants)
from pants.engine.fs import DigestContents, PathGlobs
from pants.engine.rules import Get, collect_rules, rule
from pants.util.frozendict import FrozenDict

from localai.errors import LocalAIError

MATRIX_PATH = "3rdparty/accelerators.toml"
# Top-level tables of the matrix file that are not accelerators (read by their own modules).
NOT_ACCELERATORS = ("localai",)  # model/localai_layout.py: LocalAI's profiles and the pin policy
_REQUIRED = ("index", "pip_options", "capabilities", "platforms", "forbidden", "python", "size_budget_mb")


class AcceleratorMatrixError(LocalAIError):
    pass


# Shared libraries of a GPU runtime, by the sonames ELF files NEED. A library that NEEDs one of
# these fails to load where that runtime is absent (PyPI's torchaudio 2.11: libcudart.so.13).
GPU_RUNTIME_LIBS = {
    "cuda": (
        "libcuda.so*", "libcudart.so*", "libcublas.so*", "libcublasLt.so*", "libcudnn*.so*", "libcufft.so*",
        "libcufftw.so*", "libcurand.so*", "libcusolver.so*", "libcusolverMg.so*", "libcusparse.so*",
        "libcusparseLt.so*", "libnccl.so*", "libnvrtc.so*", "libnvrtc-builtins.so*", "libnvJitLink.so*",
        "libnvToolsExt.so*", "libnvtx3interop.so*", "libcupti.so*", "libnvshmem*.so*", "libcufile.so*",
        "libnvidia-ml.so*", "libc10_cuda.so", "libtorch_cuda*.so", "libcaffe2_nvrtc.so",
    ),
    "rocm": (
        "libamdhip64.so*", "libhiprtc.so*", "librocblas.so*", "libhipblas.so*", "libhipblaslt.so*",
        "libMIOpen.so*", "librccl.so*", "libhsa-runtime64.so*", "libroctx64.so*", "libroctracer64.so*",
        "librocm_smi64.so*", "libhipfft.so*", "libhipsparse.so*", "libhiprand.so*", "librocrand.so*",
        "librocsolver.so*", "libhipsolver.so*", "libc10_hip.so", "libtorch_hip.so",
    ),
    "xpu": ("libze_loader.so*", "libsycl.so*", "libc10_xpu.so", "libtorch_xpu.so", "libmkl_sycl*.so*"),
}


def _major(version: str | None) -> int | None:
    head = (version or "").split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _glob_matches(name: str, version: str | None, pattern: str) -> bool:
    for op in (">=", "<"):
        if op in pattern:
            glob, bound = pattern.split(op, 1)
            major = _major(version)
            if major is None or not fnmatch.fnmatchcase(name, glob.strip()):
                return False
            return major >= int(bound) if op == ">=" else major < int(bound)
    return fnmatch.fnmatchcase(name, pattern)


def forbidden_by(name: str, version: str | None, patterns: Iterable[str]) -> bool:
    """Whether a project is forbidden by an accelerator's ``forbidden`` list (see
    3rdparty/accelerators.toml: globs, "glob>=N"/"glob<N" major-version bounds, "!glob" exemptions).
    A bounded glob does not match a project whose version is unknown."""
    patterns = tuple(patterns)
    if any(_glob_matches(name, version, p[1:]) for p in patterns if p.startswith("!")):
        return False
    return any(_glob_matches(name, version, p) for p in patterns if not p.startswith("!"))


_AUDITWHEEL_HASH = re.compile(r"[.-][0-9a-f]{8}(?=\.so)")


def python_version_of(constraint: str) -> str:
    """`CPython==3.11.*` -> `3.11`: the one CPython X.Y an accelerator's `python` names (what the
    portable interpreter, the exported environments and the lock check are for)."""
    m = re.fullmatch(r"\s*CPython\s*==\s*(\d+\.\d+)(\.\*)?\s*", constraint)
    if not m:
        raise AcceleratorMatrixError(
            f"the accelerator's interpreter constraint {constraint!r} does not name one CPython X.Y",
            file=MATRIX_PATH,
            fix="Write `python = \"CPython==X.Y.*\"`.",
        )
    return m.group(1)


def canonical_soname(soname: str) -> str:
    """The soname without the hash auditwheel grafts into vendored copies: torchvision's
    image.so NEEDs ``libcudart.faf08d9a.so.13``, which is libcudart.so.13."""
    return _AUDITWHEEL_HASH.sub("", soname)


def is_gpu_runtime(soname: str) -> bool:
    name = canonical_soname(soname)
    return any(fnmatch.fnmatchcase(name, pat) for pats in GPU_RUNTIME_LIBS.values() for pat in pats)


@dataclass(frozen=True)
class Accelerator:
    name: str
    description: str
    index: str
    pip_options: str
    capabilities: tuple[str, ...]
    platforms: tuple[str, ...]
    forbidden: tuple[str, ...]
    python: str
    size_budget_mb: int
    lock_note: str | None = None
    allowed_gpu_libs: tuple[str, ...] = ()
    system_libs: tuple[str, ...] = ()

    def forbidden_in(self, projects: Iterable[str | tuple[str, str]], exempt: Iterable[str] = ()) -> tuple[str, ...]:
        """The names among ``projects`` (names, or (name, version) pairs) this accelerator forbids:
        names matching a ``forbidden`` glob (whose version bound, if any, the version meets) and
        no "!glob" exemption, nor in ``exempt`` (a variant's reviewed exemptions, BUILD `exempt`)."""
        spared = set(exempt)
        bad = set()
        for project in set(projects):
            name, version = (project, None) if isinstance(project, str) else project
            if name not in spared and forbidden_by(name.lower(), version, self.forbidden):
                bad.add(name)
        return tuple(sorted(bad))

    def gpu_libs_in(self, needed: Iterable[str]) -> tuple[str, ...]:
        """The GPU runtime libraries among ``needed`` (DT_NEEDED names) this accelerator does not
        allow (3rdparty/accelerators.toml ``allowed_gpu_libs``)."""
        return tuple(
            sorted(
                lib
                for lib in set(needed)
                if is_gpu_runtime(lib)
                and not any(fnmatch.fnmatchcase(canonical_soname(lib), pat) for pat in self.allowed_gpu_libs)
            )
        )


@dataclass(frozen=True)
class AcceleratorMatrix:
    accelerators: FrozenDict[str, Accelerator]

    @classmethod
    def parse(cls, content: str, path: str = MATRIX_PATH) -> "AcceleratorMatrix":
        try:
            data = toml.loads(content)
        except toml.TomlDecodeError as e:
            raise AcceleratorMatrixError(f"{path}: not valid TOML: {e}") from e
        accels = {}
        for name, table in data.items():
            if name in NOT_ACCELERATORS:
                continue
            missing = [k for k in _REQUIRED if k not in table]
            if missing:
                raise AcceleratorMatrixError(
                    f"{path}: accelerator [{name}] lacks {', '.join(missing)} "
                    f"(every accelerator needs {', '.join(_REQUIRED)})"
                )
            accels[name] = Accelerator(
                name=name,
                description=table.get("description", ""),
                index=table["index"],
                pip_options=table["pip_options"],
                capabilities=tuple(table["capabilities"]),
                platforms=tuple(table["platforms"]),
                forbidden=tuple(table["forbidden"]),
                python=table["python"],
                size_budget_mb=int(table["size_budget_mb"]),
                lock_note=table.get("lock_note"),
                allowed_gpu_libs=tuple(table.get("allowed_gpu_libs", ())),
                system_libs=tuple(table.get("system_libs", ())),
            )
        return cls(FrozenDict(accels))

    def get(self, name: str, *, context: str) -> Accelerator:
        if name not in self.accelerators:
            raise AcceleratorMatrixError(
                f"{context}: unknown accelerator '{name}'. Known accelerators "
                f"({MATRIX_PATH}): {', '.join(sorted(self.accelerators))}. Fix the name, or "
                f"declare '{name}' in {MATRIX_PATH}."
            )
        return self.accelerators[name]


@rule
async def load_accelerator_matrix() -> AcceleratorMatrix:
    contents = await Get(
        DigestContents,
        PathGlobs([MATRIX_PATH]),
    )
    if not contents:
        raise AcceleratorMatrixError(f"{MATRIX_PATH} is missing: it declares every accelerator.")
    return AcceleratorMatrix.parse(contents[0].content.decode(), MATRIX_PATH)


def rules():
    return collect_rules()
