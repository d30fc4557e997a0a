"""A throwaway copy of this repository's build setup, for tests that run Pants itself."""
from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

# What a repository needs to run ./pants with the localai plugin (declared as `files` in BUILD).
# backends/common/cpu_levels.json: the CPU level table the native plugin reads when it loads;
# lockfiles/pants-plugins.lock: the plugin's resolve, which the OCI layer step runs on.
BUILD_SETUP = ("pants", "pants.toml", "pants-plugins", "3rdparty", "backends/common/cpu_levels.json", "lockfiles/pants-plugins.lock")
# The environment pants.toml names (`worker`): every repository with that pants.toml needs it.
ENVIRONMENTS = "3rdparty/remote-worker/BUILD"
# Backends and an engine, with what packaging them reads (and pants.ci.toml), for the tests that
# build in a temporary repository.


def backend_sources(name: str) -> tuple[str, ...]:
    return ("backends/BUILD", "backends/common", "backends/proto", f"backends/{name}", f"lockfiles/{name}-cpu.lock",
            "pants.ci.toml")


# A torch backend with a VAD answer (LocalAI's installer test).
SILERO_VAD = "backends/silero-vad:cpu"
SILERO_VAD_SOURCES = backend_sources("silero-vad")
# The lightest Python backend (238 MB installed, no torch: onnxruntime, numpy, espeak-ng), for the
# tests that build cold more than once (reproducible, remote-build).
KITTEN_TTS = "backends/kitten-tts:cpu"
KITTEN_TTS_SOURCES = backend_sources("kitten-tts")
MINILM_ENGINE_SOURCES = ("engines/BUILD", "engines/minilm", "3rdparty/native/BUILD", "lockfiles/native-toolchain.lock")


def make_temp_repo(dest: Path, extra: tuple[str, ...] = ()) -> Path:
    """The build setup, plus `extra` paths of this repository kept with their BUILD files.

    The setup's own BUILD files are left out: they name this repository's resolves, which the
    tests replace.
    """
    dest.mkdir(parents=True, exist_ok=True)
    for name in BUILD_SETUP:
        src = Path(name)
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("*_test.py", "__pycache__", "BUILD"))
        else:
            shutil.copy2(src, dest / name)
    shutil.copy2(ENVIRONMENTS, dest / ENVIRONMENTS)
    for name in extra:
        src = Path(name)
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            # A backend's unit tests are not part of its build; an engine's tests dir is (its C++ tests).
            skip = ("__pycache__",) if name.startswith("engines/") else ("__pycache__", "tests")
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns(*skip), dirs_exist_ok=True)
        else:
            shutil.copy2(src, dest / name)
    (dest / "BUILD").write_text("")
    return dest


def run_pants(repo: Path, *args: str, timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PANTS_")}, **(env or {})}
    env["PANTS_CONCURRENT"] = "True"
    return subprocess.run(
        ["./pants", "--no-pantsd", "--no-dynamic-ui", *args],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )


def local_index_options(repo: Path) -> list[str]:
    """Pants options that make a temporary repository's own folders its package sources: `.pypi/`
    as the only index (find-links) and `.wheelhouse/` as the accelerator wheelhouse."""
    wheelhouse = repo / ".wheelhouse"
    return [
        "--python-repos-indexes=[]",
        f"--python-repos-find-links=['file://{repo}/.pypi/']",
        f"--python-repos-path-mappings=['WHEELHOUSE|{wheelhouse}']",
        f"--subprocess-environment-env-vars=['LOCALAI_WHEELHOUSE={wheelhouse}']",
    ]


def write_wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal valid pure-Python wheel (METADATA, WHEEL, RECORD), enough for pip to lock it."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    files = {
        f"{dist}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as zf:
        for arcname, text in files.items():
            data = text.encode()
            zf.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arcname},sha256={digest},{len(data)}")
        record.append(f"{dist}-{version}.dist-info/RECORD,,")
        zf.writestr(f"{dist}-{version}.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def declare_backend(repo: Path, name: str, accelerators: dict[str, str], base: str = "") -> None:
    folder = repo / "backends" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "requirements.txt").write_text(base)
    for accel, overlay in accelerators.items():
        (folder / f"requirements-{accel}.txt").write_text(overlay)
    (folder / "BUILD").write_text(f"localai_backend(accelerators={list(accelerators)!r})\n")
    for shared in ("common", "proto"):
        (repo / "backends" / shared).mkdir(parents=True, exist_ok=True)
    (repo / "backends/common/BUILD").write_text('localai_sources(name="common")\npython_sources(name="py")\n')
    (repo / "backends/proto/BUILD").write_text('localai_proto(name="proto", sources=[])\n')


def resolve_options(name: str, accelerators) -> list[str]:
    resolves = {f"{name}-{a}": f"lockfiles/{name}-{a}.lock" for a in accelerators}
    pip = {f"{name}-{a}": f"3rdparty/accelerators/{a}.txt" for a in accelerators}
    return [
        f"--python-resolves={resolves!r}",
        f"--python-resolves-to-constraints-file={pip!r}",
        "--python-resolves-to-interpreter-constraints={}",
    ]
