"""The worker image of the remote execution test: what 3rdparty/remote-worker/BUILD's `worker`
environment names, at /opt/localai-worker on the test workers (reapi_worker.py's sandbox).

A real worker image unpacks the python-build-standalone archives 3rdparty/bootstrap/interpreters.txt
pins; GitHub is unreachable here, so the image holds stand-ins of the same layout relocated from
this machine's CPython 3.9 and 3.11 (portable_python_standin.py). The 3.9 archive is also what
Pants, in a remote environment, unpacks on the worker to run its pex tool on
(`[python-bootstrap].internal_python_build_standalone_info`): an input of the actions, from the CAS.
"""
from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

from tests.integration.portable_python_standin import machine_cpython, relocated_cpython_archive

VERSIONS = ("3.9", "3.11")


def worker_image(workdir: Path, wheelhouse: Path | None = None) -> tuple[Path, dict[str, list]]:
    """Writes the image folder (python3.9/, python3.11/, and a copy of `wheelhouse` for the torch
    backends) under `workdir`; returns it and the value of `internal_python_build_standalone_info`
    that names the 3.9 archive by URL, sha256 and size."""
    image = workdir / "image"
    image.mkdir(parents=True)
    archives = {}
    for version in VERSIONS:
        archives[version] = relocated_cpython_archive(machine_cpython(version), workdir)
        with tarfile.open(archives[version]) as tar:
            tar.extractall(workdir / f"unpacked-{version}", filter="tar")
        (workdir / f"unpacked-{version}/python").rename(image / f"python{version}")
    if wheelhouse:
        shutil.copytree(wheelhouse, image / "wheelhouse")
    scripts = archives["3.9"]
    info = {"linux_x86_64": [scripts.as_uri(), hashlib.sha256(scripts.read_bytes()).hexdigest(), scripts.stat().st_size]}
    return image, info
