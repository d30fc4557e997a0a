"""The OCI image of a backend folder, built by a cached process (layout.py, standard library).

`pants package backends/<name>:<accel>` writes it next to the folder:
  dist/images/<name>/<accel>/layout/         OCI image layout (what `pants publish` pushes)
  dist/images/<name>/<accel>/image.oci.tar   the same as one tarball, for LocalAI's ocifile://
  dist/images/<name>/<accel>/image.json      manifest digest, layers (digest, size, diff_id)

The image is a process, not rule code, so its output lands in Pants' local and remote caches
like the PEX: a warm build does not re-gzip a 200 MB layer.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex_environment import PythonExecutable
from pants.engine.fs import AddPrefix, CreateDigest, Digest, DigestContents, DigestSubset, MergeDigests, PathGlobs, RemovePrefix
from pants.engine.process import Process, ProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.scripts import script_file

SCRIPT = "layout.py"  # oci/layout.py, run as a process
IMAGES_DIR = "images"  # under dist/
IMAGE_JSON = "image.json"
IMAGE_TARBALL = "image.oci.tar"
LAYOUT_DIR = "layout"


def image_dir(backend: str, accelerator: str) -> str:
    return f"{IMAGES_DIR}/{backend}/{accelerator}"


@dataclass(frozen=True)
class BackendImageRequest:
    folder: Digest  # the backend folder's files at the digest root
    backend: str
    accelerator: str
    ref_name: str  # e.g. cpu-silero-vad
    annotations: tuple[tuple[str, str], ...]
    interpreter_constraints: InterpreterConstraints
    own_layer_dirs: tuple[str, ...] = ()  # folders that get one layer each (python/: shared by every image)


@dataclass(frozen=True)
class BackendImage:
    digest: Digest  # under images/<name>/<accel>/
    manifest_digest: str  # sha256:...
    summary: str  # image.json


@rule(desc="Build a backend's OCI image", level=LogLevel.DEBUG)
async def build_backend_image(request: BackendImageRequest) -> BackendImage:
    python = await Get(PythonExecutable, InterpreterConstraints, request.interpreter_constraints)
    folder, script = await Get(Digest, AddPrefix(request.folder, "folder")), await Get(
        Digest, CreateDigest([script_file("localai.oci", SCRIPT)])
    )
    argv = [python.path, SCRIPT, "folder", "out", f"--ref-name={request.ref_name}"]
    argv += [f"--annotation={k}={v}" for k, v in request.annotations]
    argv += [f"--own-layer-dir={d}" for d in request.own_layer_dirs]
    result = await Get(
        ProcessResult,
        Process(
            argv=argv,
            input_digest=await Get(Digest, MergeDigests([folder, script])),
            output_directories=("out",),
            description=f"OCI image {request.ref_name}",
            level=LogLevel.DEBUG,
        ),
    )
    out = await Get(Digest, RemovePrefix(result.output_digest, "out"))
    summary = await Get(DigestContents, DigestSubset(out, PathGlobs([IMAGE_JSON])))
    text = summary[0].content.decode()
    return BackendImage(
        await Get(Digest, AddPrefix(out, image_dir(request.backend, request.accelerator))),
        json.loads(text)["manifest_digest"],
        text,
    )


def rules():
    return collect_rules()
