"""The OCI image of a backend folder, built from cached steps (layout.py, run with zstandard).

`pants package backends/<name>:<accel>` writes it next to the folder:
  dist/images/<name>/<accel>/layout/         OCI image layout (what `pants publish` pushes)
  dist/images/<name>/<accel>/image.oci.tar   the same as one tarball, for LocalAI's ocifile://, only
                                             with [localai-oci].tarball (else `localai-bundle` writes
                                             it from layout/ when it is needed)
  dist/images/<name>/<accel>/image.json      manifest digest, layers (digest, size, diff_id)

One process per layer, its input only that layer's files: each big installed distribution
(site-packages/, its RECORD's files) is tarred and hashed by a process keyed by those files, so
after an edit of the backend's own code only the small-files layer is written again and the distribution layers
come from Pants' cache (local or remote) like any other process output. Then one process writes
the config, the manifest (and, with [localai-oci].tarball, the tarball) from the layers' descriptors. The bytes are those of
layout.py's one-shot `main` (oci/layout_test.py checks that the two agree).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.util_rules.pex import PexRequest, VenvPex, VenvPexProcess
from pants.engine.fs import (
    AddPrefix,
    CreateDigest,
    Digest,
    DigestContents,
    DigestEntries,
    DigestSubset,
    FileContent,
    FileEntry,
    MergeDigests,
    PathGlobs,
    RemovePrefix,
    SymlinkEntry,
)
from pants.engine.process import Process, ProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.folder import RUN_SH
from localai.oci.options import OciSubsystem
from localai.oci.scripts.layout import OWN_LAYER_BYTES, RECORDS_GLOB, group_paths, record_owners
from localai.scripts import script_file, script_venv_request

SCRIPT = "layout.py"  # oci/scripts/layout.py, run as a process
IMAGES_DIR = "images"  # under dist/
IMAGE_JSON = "image.json"
IMAGE_TARBALL = "image.oci.tar"
LAYOUT_DIR = "layout"
BLOB_LINK_PREFIX = "blob-"  # blob-<hex>/<hex> in the image step's sandbox (layout.image_main)
# layout.py is the plugin's own script: it runs on the plugin's resolve (3rdparty/python), which pins
# the zstandard it compresses layers with, the same pin as the venv Pants runs the plugin in.
LAYOUT_RESOLVE = "pants-plugins"
LAYOUT_REQUIREMENTS = ("zstandard",)


def image_dir(backend: str, accelerator: str) -> str:
    return f"{IMAGES_DIR}/{backend}/{accelerator}"


@dataclass(frozen=True)
class BackendImageRequest:
    folder: Digest  # the backend folder's files at the digest root
    backend: str
    accelerator: str
    ref_name: str  # e.g. cpu-silero-vad
    annotations: tuple[tuple[str, str], ...]
    own_layer_dirs: tuple[str, ...] = ()  # folders that get one layer each (python/: shared by every image)
    architecture: str = "amd64"  # the config's (platforms.py oci_architecture)


@dataclass(frozen=True)
class BackendImage:
    digest: Digest  # under images/<name>/<accel>/
    manifest_digest: str  # sha256:...
    summary: str  # image.json


class ImageFolderError(LocalAIError):
    pass


@dataclass(frozen=True)
class ImageLayerRequest:
    files: Digest  # the layer's files at their image paths
    created_by: str


@dataclass(frozen=True)
class ImageLayer:
    blob: Digest  # the blob file, named <hex>, at the digest root
    hexdigest: str
    descriptor: str  # layer.json: media type, digest, size, diff_id, created_by


@dataclass(frozen=True)
class LayoutTool:
    """layout.py and a venv that runs it."""

    venv_pex: VenvPex
    script: Digest


@rule(desc="Set up the OCI layout writer", level=LogLevel.DEBUG)
async def layout_tool(python_setup: PythonSetup) -> LayoutTool:
    venv_pex, script = await MultiGet(
        Get(VenvPex, PexRequest, script_venv_request(python_setup, LAYOUT_RESOLVE, LAYOUT_REQUIREMENTS, "oci-layout.pex", "the localai OCI layout writer")),
        Get(Digest, CreateDigest([script_file("localai.oci.scripts", SCRIPT)])),
    )
    return LayoutTool(venv_pex, script)


@rule(desc="Build an OCI image layer", level=LogLevel.DEBUG)
async def build_image_layer(request: ImageLayerRequest, tool: LayoutTool) -> ImageLayer:
    # The modes the layer records come from the digest, not from the sandbox (layout.layer_main).
    entries = await Get(DigestEntries, Digest, request.files)
    executables = json.dumps(sorted(e.path for e in entries if isinstance(e, FileEntry) and e.is_executable))
    files, listing = await MultiGet(
        Get(Digest, AddPrefix(request.files, "folder")),
        Get(Digest, CreateDigest([FileContent("executables.json", executables.encode())])),
    )
    result = await Get(
        ProcessResult,
        VenvPexProcess(
            tool.venv_pex,
            argv=(SCRIPT, "layer", "folder", "out", f"--created-by={request.created_by}", "--executables=executables.json"),
            input_digest=await Get(Digest, MergeDigests([files, listing, tool.script])),
            output_directories=("out",),
            description=f"OCI layer ({request.created_by})",
            level=LogLevel.DEBUG,
        ),
    )
    out = await Get(Digest, RemovePrefix(result.output_digest, "out"))
    blob, descriptor = await MultiGet(
        Get(Digest, DigestSubset(out, PathGlobs(["blobs/sha256/*"]))), Get(DigestContents, DigestSubset(out, PathGlobs(["layer.json"])))
    )
    text = descriptor[0].content.decode()
    return ImageLayer(await Get(Digest, RemovePrefix(blob, "blobs/sha256")), json.loads(text)["digest"].split(":")[1], text)


@rule(desc="Build a backend's OCI image", level=LogLevel.DEBUG)
async def build_backend_image(request: BackendImageRequest, oci: OciSubsystem, tool: LayoutTool) -> BackendImage:
    entries = await Get(DigestEntries, Digest, request.folder)
    links = [e.path for e in entries if isinstance(e, SymlinkEntry)]
    if links:
        raise ImageFolderError(
            f"{request.ref_name}: {', '.join(links)} are symlinks, which a backend image does not carry. Fix: copy the file instead."
        )
    files = {e.path: e for e in entries if isinstance(e, FileEntry)}
    if RUN_SH not in files or not files[RUN_SH].is_executable:
        raise ImageFolderError(
            f"{request.ref_name}: no executable run.sh at the folder root; LocalAI refuses such an image. Fix: package it with its run.sh."
        )
    # Grouped from the entries' sizes and the installed distributions' RECORDs (no other file
    # read); each group's files are their own digest, so a layer's process key is exactly its files.
    records = await Get(DigestContents, DigestSubset(request.folder, PathGlobs([RECORDS_GLOB])))
    owners = record_owners({fc.path: fc.content.decode("utf-8") for fc in records})
    sizes = {p: e.file_digest.serialized_bytes_length for p, e in files.items()}
    groups = group_paths(sizes, OWN_LAYER_BYTES, request.own_layer_dirs, owners)
    layer_files = await MultiGet(Get(Digest, CreateDigest([files[p] for p in group])) for _, group in groups)
    layers = await MultiGet(Get(ImageLayer, ImageLayerRequest(d, label)) for d, (label, _) in zip(layer_files, groups))
    descriptors = "[" + ",".join(layer.descriptor for layer in layers) + "]"
    inputs = await Get(Digest, MergeDigests([tool.script, await Get(Digest, CreateDigest([FileContent("layers.json", descriptors.encode())]))]))
    argv = [SCRIPT, "image", "layers.json", ".", "out", f"--ref-name={request.ref_name}", f"--architecture={request.architecture}"]
    argv += [f"--annotation={k}={v}" for k, v in request.annotations]
    argv += ["--tarball"] if oci.tarball else []
    process = await Get(
        Process,
        VenvPexProcess(
            tool.venv_pex,
            argv=tuple(argv),
            input_digest=inputs,
            output_directories=("out",),
            description=f"OCI image {request.ref_name}",
            level=LogLevel.DEBUG,
        ),
    )
    if oci.tarball:
        # Only the tarball reads the blobs. Linked, not copied, into the sandbox, one link per
        # layer blob: the wheel layers are hundreds of MB, and a link stays valid between builds.
        links = {f"{BLOB_LINK_PREFIX}{layer.hexdigest}": layer.blob for layer in layers}
        process = dataclasses.replace(process, immutable_input_digests=FrozenDict({**process.immutable_input_digests, **links}))
    result = await Get(ProcessResult, Process, process)
    out = await Get(Digest, RemovePrefix(result.output_digest, "out"))
    layout_blobs = await Get(Digest, AddPrefix(await Get(Digest, MergeDigests(layer.blob for layer in layers)), f"{LAYOUT_DIR}/blobs/sha256"))
    summary = await Get(DigestContents, DigestSubset(out, PathGlobs([IMAGE_JSON])))
    text = summary[0].content.decode()
    return BackendImage(
        await Get(Digest, AddPrefix(await Get(Digest, MergeDigests([out, layout_blobs])), image_dir(request.backend, request.accelerator))),
        json.loads(text)["manifest_digest"],
        text,
    )


def rules():
    return collect_rules()
