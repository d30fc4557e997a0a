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
    m = _PYTHON.fullmatch(constraint)
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


def _shown(value) -> str:
    """A TOML value as the user wrote it, with its kind: `"cpu"` (a string)."""
    kind = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "a table"}
    shown = repr(value) if not isinstance(value, dict) else "{...}"
    return f"{shown} ({kind.get(type(value), type(value).__name__)})"


_PYTHON = re.compile(r"\s*CPython\s*==\s*(\d+\.\d+)(\.\*)?\s*")
_PLATFORM = re.compile(r"(linux|macosx_\d+_\d+)_(x86_64|aarch64|arm64)")
# key: (kind of value, what is expected, an example of a right value)
ACCELERATOR_KEYS = {
    "description": ("string", "a string: one line saying what the accelerator is", '"CPU only"'),
    "index": ("url", "the URL of the accelerator's package index, as a non-empty string", '"https://pypi.org/simple"'),
    "pip_options": ("path", "the path of its pip options file, as a non-empty string", '"3rdparty/accelerators/cpu.txt"'),
    "capabilities": ("names", "a non-empty list of LocalAI capability keys (strings)", '["default", "cpu"]'),
    "platforms": ("platforms", "a non-empty list of wheel platform tags (linux_x86_64, linux_aarch64, macosx_11_0_arm64)", '["linux_x86_64"]'),
    "forbidden": ("strings", "a list of project globs (strings)", '["nvidia-*", "triton"]'),
    "allowed_gpu_libs": ("strings", "a list of soname globs (strings)", '["libcudart.so.12*"]'),
    "system_libs": ("strings", "a list of sonames (strings)", '["libcuda.so.1"]'),
    "python": ("python", 'the interpreter constraint "CPython==X.Y.*"', '"CPython==3.11.*"'),
    "size_budget_mb": ("mb", "a whole number of megabytes greater than 0", "600"),
    "lock_note": ("string", "a string: why the lockfile cannot be made here", '"the index is unreachable"'),
}


def _checked(path: str, accel: str, key: str, value):
    """One key of an accelerator's table, checked against ACCELERATOR_KEYS: the value as the
    Accelerator holds it, or an error naming the file, the key, what was expected and the fix."""
    kind, expected, example = ACCELERATOR_KEYS[key]
    ok = {
        "string": lambda v: isinstance(v, str),
        "url": lambda v: isinstance(v, str) and bool(v.strip()),
        "path": lambda v: isinstance(v, str) and bool(v.strip()),
        "names": lambda v: isinstance(v, list) and bool(v) and all(isinstance(x, str) and x.strip() for x in v),
        "strings": lambda v: isinstance(v, list) and all(isinstance(x, str) and x.strip() for x in v),
        "platforms": lambda v: isinstance(v, list) and bool(v) and all(isinstance(x, str) and _PLATFORM.fullmatch(x) for x in v),
        "python": lambda v: isinstance(v, str) and bool(_PYTHON.fullmatch(v)),
        "mb": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
    }[kind](value)
    if not ok:
        raise AcceleratorMatrixError(
            f"[{accel}] {key} = {_shown(value)}: expected {expected}.",
            file=path,
            fix=f"Write e.g. `{key} = {example}` in [{accel}].",
        )
    return tuple(value) if isinstance(value, list) else value


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
            if not isinstance(table, dict):
                raise AcceleratorMatrixError(
                    f"'{name}' is {_shown(table)}, but every top-level key other than "
                    f"{', '.join(NOT_ACCELERATORS)} names an accelerator and must be a table.",
                    file=path,
                    fix=f"Write it as a table: `[{name}]` followed by its keys ({', '.join(_REQUIRED)}).",
                )
            missing = [k for k in _REQUIRED if k not in table]
            if missing:
                raise AcceleratorMatrixError(
                    f"{path}: accelerator [{name}] lacks {', '.join(missing)} "
                    f"(every accelerator needs {', '.join(_REQUIRED)})"
                )
            unknown = sorted(set(table) - set(ACCELERATOR_KEYS))
            if unknown:
                raise AcceleratorMatrixError(
                    f"accelerator [{name}] has unknown key(s) {', '.join(unknown)}.",
                    file=path,
                    fix=f"Fix the spelling or remove them; an accelerator's keys are {', '.join(ACCELERATOR_KEYS)}.",
                )
            value = {key: _checked(path, name, key, table[key]) for key in table}
            accels[name] = Accelerator(
                name=name,
                description=value.get("description", ""),
                index=value["index"],
                pip_options=value["pip_options"],
                capabilities=value["capabilities"],
                platforms=value["platforms"],
                forbidden=value["forbidden"],
                python=value["python"],
                size_budget_mb=value["size_budget_mb"],
                lock_note=value.get("lock_note"),
                allowed_gpu_libs=value.get("allowed_gpu_libs", ()),
                system_libs=value.get("system_libs", ()),
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
