"""LocalAI's backend installer (core/gallery/backends.go), played by the tests, written
independently of the build's OCI code: resolve a gallery entry, fetch the image (OCI reference
by digest from a registry, or an `ocifile://` tarball), stage it in
`<backends>/<name>.install-tmp`, require an executable run.sh at its root, swap it into
`<backends>/<name>`, then write LocalAI's own metadata.json into the folder."""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import platform
import shutil
import tarfile
import urllib.request
from pathlib import Path

import yaml
import zstandard

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST_ACCEPT = f"application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, {MEDIA_INDEX}"
# runtime.GOARCH of the machine LocalAI runs on, by platform.machine().
GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}


class InstallError(RuntimeError):
    pass


def resolve_entry(index_yaml: str, backend: str, capability: str = "default") -> dict:
    """The concrete entry LocalAI picks for `backend` on a machine with `capability`."""
    entries = {e["name"]: e for e in yaml.safe_load(index_yaml)}
    meta = entries[backend]
    name = meta.get("capabilities", {}).get(capability)
    if not name:
        raise InstallError(f"{backend}: no entry for capability {capability!r} in {meta.get('capabilities')}")
    return entries[name]


def _get(url: str, accept: str | None = None) -> bytes:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=300) as r:
        return r.read()


def decompress(layer: bytes) -> bytes:
    """A layer's tar, by its first bytes as go-containerregistry's layer reader peeks them (not by
    media type): zstd, gzip, or a plain tar."""
    if layer[:4] == b"\x28\xb5\x2f\xfd":
        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(layer)).read()
    if layer[:2] == b"\x1f\x8b":
        return gzip.decompress(layer)
    return layer


def _checked(data: bytes, digest: str, what: str) -> bytes:
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise InstallError(f"{what}: content does not match {digest}")
    return data


def pull_layers(reference: str, architecture: str | None = None) -> list[tuple[str, bytes]]:
    """(media type, blob) of each layer of `<host>/<repo>@sha256:...`, checked against its digest.
    An image index resolves to its linux/<architecture> manifest (default: this machine's), as
    LocalAI's pull does (go-containerregistry's remote.Image with remote.WithPlatform)."""
    if "@" not in reference:
        raise InstallError(f"{reference}: not pinned by digest")
    name, digest = reference.split("@", 1)
    host, repo = name.split("/", 1)
    base = f"http://{host}/v2/{repo}"
    manifest = json.loads(_checked(_get(f"{base}/manifests/{digest}", MANIFEST_ACCEPT), digest, reference))
    if manifest.get("mediaType") == MEDIA_INDEX:
        arch = architecture or GOARCH[platform.machine()]
        # Matched as go-containerregistry does when no variant is asked for: os and architecture.
        chosen = [m for m in manifest["manifests"] if (m.get("platform", {}).get("os"), m.get("platform", {}).get("architecture")) == ("linux", arch)]
        if len(chosen) != 1:
            raise InstallError(f"{reference}: no child with platform linux/{arch} in the index ({manifest['manifests']})")
        digest = chosen[0]["digest"]
        manifest = json.loads(_checked(_get(f"{base}/manifests/{digest}", MANIFEST_ACCEPT), digest, reference))
    return [(l["mediaType"], _checked(_get(f"{base}/blobs/{l['digest']}"), l["digest"], reference)) for l in manifest["layers"]]


def ocifile_layers(path: Path) -> list[tuple[str, bytes]]:
    """Layers of an ocifile:// tarball, through its docker-save manifest.json (what LocalAI reads)."""
    with tarfile.open(path) as tar:
        docker = json.load(tar.extractfile("manifest.json"))
        index = json.load(tar.extractfile("index.json"))
        desc = index["manifests"][0]
        manifest = json.loads(_checked(tar.extractfile(f"blobs/sha256/{desc['digest'].split(':')[1]}").read(), desc["digest"], str(path)))
        layers = [tar.extractfile(p).read() for p in docker[0]["Layers"]]
    for data, l in zip(layers, manifest["layers"]):
        _checked(data, l["digest"], str(path))
    return [(l["mediaType"], data) for data, l in zip(layers, manifest["layers"])]


def install(entry: dict, backends: Path, architecture: str | None = None) -> Path:
    uri = entry["uri"]
    layers = ocifile_layers(Path(uri[len("ocifile://"):])) if uri.startswith("ocifile://") else pull_layers(uri, architecture)
    final = backends / entry["name"]
    tmp = backends / f"{entry['name']}.install-tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for _, layer in layers:
        raw = decompress(layer)
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            for m in tar.getmembers():
                if m.name.startswith("/") or ".." in Path(m.name).parts:
                    raise InstallError(f"{uri}: unsafe path {m.name} in a layer")
            tar.extractall(tmp)
    run_sh = tmp / "run.sh"
    if not run_sh.is_file() or not os.access(run_sh, os.X_OK):
        shutil.rmtree(tmp)
        raise InstallError(f"{uri}: no executable run.sh at the image root")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    digest = uri.split("@", 1)[1] if "@" in uri else ""
    (final / "metadata.json").write_text(
        json.dumps({"name": entry["name"], "alias": entry.get("alias", ""), "uri": uri, "digest": digest, "installed_at": "test"})
    )
    return final
