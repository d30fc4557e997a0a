"""A backend folder as an OCI image, written deterministically, with the standard library only.

LocalAI's backend images are `FROM scratch` images whose root is the backend folder (run.sh,
the artifact, its records). This module writes such an image twice over:

  <out>/layout/           an OCI image layout (oci-layout, index.json, blobs/sha256/...)
  <out>/image.oci.tar     the same files as one tarball that is both an OCI layout archive and
                          a `docker save` archive (manifest.json), which is what LocalAI's
                          `ocifile://` side-loading reads (go-containerregistry's tarball package)

Bit-identical for the same folder: tar entries sorted, mtime fixed, uid/gid 0, no user or group
names, modes normalised (0755 for executables and directories, 0644 otherwise), gzip with mtime
0 and no file name; a layer of already-compressed data (a wheel's zip in the packed PEX) is
stored as plain tar (OCI media type ...layer.v1.tar), since gzip would cost seconds and save
nothing. Layers: every file at or above `--own-layer-bytes` gets a layer of its own (each wheel
of the packed PEX, backend.pex/.deps/<wheel>: torch is the same layer in every image that
carries it), and each `--own-layer-dir` (python/, the portable interpreter) is one layer, so two
images that carry the same bytes share that layer's digest and a registry stores it once; the
small files (run.sh, records, SBOM, provenance, the backend's sources) share the last layer.

It runs inside the Pants sandbox as a process (`python layout.py <folder> <out> ...`, see
image.py), so the engine caches its output like any other build step.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import shutil
import sys
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
# A layer whose files do not shrink by this fraction under gzip (a wheel's zip) is stored
# uncompressed: gzip would spend ~17 s per 270 MB to save 0.1%.
MIN_GZIP_SAVING = 0.05
SAMPLE_BYTES = 1 << 20
MTIME = 0  # no build time in any byte; SOURCE_DATE_EPOCH is not needed
OWN_LAYER_BYTES = 1024 * 1024  # every wheel of 1 MiB or more: sharing below that saves little
GZIP_LEVEL = 6


@dataclass(frozen=True)
class Blob:
    media_type: str
    digest: str  # sha256:<hex>
    size: int

    def descriptor(self, **extra) -> dict:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size, **extra}


@dataclass(frozen=True)
class Image:
    manifest: Blob
    config: Blob
    layers: tuple[Blob, ...]
    diff_ids: tuple[str, ...]


def _sha256_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return "sha256:" + h.hexdigest(), size


def _mode(path: Path) -> int:
    """0755 for directories and files with any execute bit (whoever runs the build), else 0644."""
    return 0o755 if path.is_dir() or path.stat().st_mode & 0o111 else 0o644


def _tarinfo(name: str, path: Path) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = _mode(path)
    if path.is_dir():
        info.type = tarfile.DIRTYPE
    else:
        info.size = path.stat().st_size
    return info


def layer_groups(folder: Path, own_layer_bytes: int = OWN_LAYER_BYTES, own_layer_dirs: tuple[str, ...] = ()) -> list[list[str]]:
    """Relative paths per layer: each of `own_layer_dirs` whole (e.g. python/, the portable
    interpreter, identical in every image), then each other big file alone (sorted by path),
    then the rest together."""
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())
    for f in files:
        if (folder / f).is_symlink():
            raise ValueError(f"{folder / f}: symlinks are not supported in a backend image (copy the file)")
    dirs = [[f for f in files if f.startswith(d.rstrip("/") + "/")] for d in own_layer_dirs]
    dirs = [group for group in dirs if group]
    in_dirs = {f for group in dirs for f in group}
    rest = [f for f in files if f not in in_dirs]
    big = [f for f in rest if (folder / f).stat().st_size >= own_layer_bytes]
    small = [f for f in rest if f not in big]
    return dirs + [[f] for f in big] + ([small] if small else [])


def _parents(paths: list[str]) -> list[str]:
    dirs = set()
    for p in paths:
        parts = p.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    return sorted(dirs)


class _HashingWriter(io.RawIOBase):
    """Writes to a file and hashes what passes, so nothing is read twice."""

    def __init__(self, f):
        self.f, self.h, self.n = f, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.f.write(b)
        self.h.update(b)
        self.n += len(b)
        return len(b)


def worth_compressing(folder: Path, paths: list[str]) -> bool:
    """Whether gzip saves MIN_GZIP_SAVING on a sample of each file (deterministic: content only)."""
    raw = packed = 0
    for p in paths:
        with (folder / p).open("rb") as f:
            sample = f.read(SAMPLE_BYTES)
            f.seek(max(0, (folder / p).stat().st_size // 2))
            sample += f.read(SAMPLE_BYTES)
        raw += len(sample)
        packed += len(zlib.compress(sample, GZIP_LEVEL))
    return raw == 0 or packed <= raw * (1 - MIN_GZIP_SAVING)


def _write_tar(folder: Path, paths: list[str], out) -> None:
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for d in _parents(paths):
            tar.addfile(_tarinfo(d, folder / d))
        for p in paths:
            with (folder / p).open("rb") as f:
                tar.addfile(_tarinfo(p, folder / p), f)


def write_layer(folder: Path, paths: list[str], blobs: Path) -> tuple[Blob, str]:
    """One tar layer into blobs/ (named by its digest), gzipped when that pays; returns it and its diff_id."""
    tmp = blobs / ".layer.tmp"
    compress = worth_compressing(folder, paths)
    with tmp.open("wb") as raw:
        stored = _HashingWriter(raw)
        if compress:
            with gzip.GzipFile(filename="", mode="wb", fileobj=stored, mtime=MTIME, compresslevel=GZIP_LEVEL) as gz:
                uncompressed = _HashingWriter(gz)
                _write_tar(folder, paths, uncompressed)
        else:
            uncompressed = stored
            _write_tar(folder, paths, stored)
    digest = "sha256:" + stored.h.hexdigest()
    tmp.rename(blobs / digest.split(":")[1])
    return Blob(MEDIA_LAYER if compress else MEDIA_LAYER_TAR, digest, stored.n), "sha256:" + uncompressed.h.hexdigest()


def _json_blob(blobs: Path, media_type: str, obj: dict) -> Blob:
    data = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    (blobs / digest.split(":")[1]).write_bytes(data)
    return Blob(media_type, digest, len(data))


def write_layout(
    folder: Path,
    out: Path,
    *,
    ref_name: str,
    annotations: dict[str, str],
    own_layer_bytes: int = OWN_LAYER_BYTES,
    own_layer_dirs: tuple[str, ...] = (),
) -> Image:
    """The OCI image layout of `folder` in `out` (created empty)."""
    if not (folder / "run.sh").is_file() or not (folder / "run.sh").stat().st_mode & 0o111:
        raise ValueError(f"{folder}: no executable run.sh at the folder root; LocalAI refuses such an image")
    blobs = out / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    layers, diff_ids, history = [], [], []
    for group in layer_groups(folder, own_layer_bytes, own_layer_dirs):
        blob, diff_id = write_layer(folder, group, blobs)
        layers.append(blob)
        diff_ids.append(diff_id)
        own_dir = next((d for d in own_layer_dirs if group[0].startswith(d.rstrip("/") + "/")), None)
        what = f"{own_dir.rstrip('/')}/" if own_dir else group[0] if len(group) == 1 else "small files"
        history.append({"created_by": "localai-build: " + what})
    config = _json_blob(
        blobs,
        MEDIA_CONFIG,
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": ["/run.sh"], "Labels": dict(sorted(annotations.items()))},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": history,
        },
    )
    manifest = _json_blob(
        blobs,
        MEDIA_MANIFEST,
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": config.descriptor(),
            "layers": [b.descriptor() for b in layers],
            "annotations": dict(sorted(annotations.items())),
        },
    )
    (out / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [manifest.descriptor(annotations={"org.opencontainers.image.ref.name": ref_name})],
    }
    (out / "index.json").write_text(json.dumps(index, sort_keys=True, separators=(",", ":")))
    # `docker save` view of the same blobs: what go-containerregistry's tarball.ImageFromPath reads.
    docker = [
        {
            "Config": f"blobs/sha256/{config.digest.split(':')[1]}",
            "RepoTags": [ref_name] if ":" in ref_name else [],
            "Layers": [f"blobs/sha256/{b.digest.split(':')[1]}" for b in layers],
        }
    ]
    (out / "manifest.json").write_text(json.dumps(docker, sort_keys=True, separators=(",", ":")))
    return Image(manifest, config, tuple(layers), tuple(diff_ids))


def write_tarball(layout: Path, dest: Path) -> None:
    """The layout as one uncompressed tar (entries sorted, fixed metadata): ocifile:// and oci-archive:."""
    paths = sorted(p.relative_to(layout).as_posix() for p in layout.rglob("*"))
    with dest.open("wb") as raw, tarfile.open(fileobj=raw, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for p in paths:
            info = _tarinfo(p, layout / p)
            info.mode = 0o755 if (layout / p).is_dir() else 0o644
            if (layout / p).is_dir():
                tar.addfile(info)
            else:
                with (layout / p).open("rb") as f:
                    tar.addfile(info, f)


def read_layout(layout: Path) -> tuple[dict, str]:
    """(manifest, manifest digest) of the one image in an OCI layout."""
    index = json.loads((layout / "index.json").read_text())
    desc = index["manifests"][0]
    data = (layout / "blobs/sha256" / desc["digest"].split(":")[1]).read_bytes()
    if "sha256:" + hashlib.sha256(data).hexdigest() != desc["digest"]:
        raise ValueError(f"{layout}: manifest blob does not match its digest {desc['digest']}")
    return json.loads(data), desc["digest"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the backend folder (run.sh at its root)")
    parser.add_argument("out", type=Path, help="writes <out>/layout/, <out>/image.oci.tar, <out>/image.json")
    parser.add_argument("--ref-name", required=True, help="org.opencontainers.image.ref.name, e.g. cpu-silero-vad")
    parser.add_argument("--annotation", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--own-layer-bytes", type=int, default=OWN_LAYER_BYTES)
    parser.add_argument("--own-layer-dir", action="append", default=[], help="a folder that gets one layer (repeatable)")
    args = parser.parse_args(argv)
    annotations = dict(a.split("=", 1) for a in args.annotation)
    layout = args.out / "layout"
    if layout.exists():
        shutil.rmtree(layout)
    image = write_layout(
        args.folder,
        layout,
        ref_name=args.ref_name,
        annotations=annotations,
        own_layer_bytes=args.own_layer_bytes,
        own_layer_dirs=tuple(args.own_layer_dir),
    )
    write_tarball(layout, args.out / "image.oci.tar")
    summary = {
        "manifest_digest": image.manifest.digest,
        "manifest_size": image.manifest.size,
        "config_digest": image.config.digest,
        "layers": [{"digest": b.digest, "size": b.size, "diff_id": d} for b, d in zip(image.layers, image.diff_ids)],
        "ref_name": args.ref_name,
    }
    (args.out / "image.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    print(image.manifest.digest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
