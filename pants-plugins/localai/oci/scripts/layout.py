"""A backend folder as an OCI image, written deterministically (the standard library and zstandard).

LocalAI's backend images are `FROM scratch` images whose root is the backend folder (run.sh,
the artifact, its records). This module writes such an image twice over:

  <out>/layout/           an OCI image layout (oci-layout, index.json, blobs/sha256/...)
  <out>/image.oci.tar     (on demand) the same files as one tarball that is both an OCI layout archive and
                          a `docker save` archive (manifest.json), which is what LocalAI's
                          `ocifile://` side-loading reads (go-containerregistry's tarball package)

Bit-identical for the same folder: tar entries sorted, mtime fixed, uid/gid 0, no user or group
names, modes normalised (0755 for executables and directories, 0644 otherwise), zstd level
ZSTD_LEVEL in one frame with no content size or checksum (OCI media type ...layer.v1.tar+zstd,
which LocalAI's go-containerregistry reads); a layer of already-compressed data (a zip) is stored
as plain tar (...layer.v1.tar), since compressing it would cost seconds and save nothing. zstd
-6 over gzip -6, measured on torch's installed files (765 MB tar, docs/benchmarks.md): 3x faster
and 23% smaller. Layers (group_paths): each
`--own-layer-dir` (python/, the portable interpreter) is one layer; each distribution installed
in site-packages/ of `--own-layer-bytes` or more is one layer, its files those its RECORD lists
(torch is the same layer in every image that carries it), so two images that carry the same
bytes share that layer's digest and a registry stores it once; the small distributions share
one layer, and the other files (run.sh, start.py, records, SBOM, provenance, the backend's own
files) share the last layer, any big one among them alone.

It runs inside the Pants sandbox as a process (`python layout.py <folder> <out> ...`, see
image.py), so the engine caches its output like any other build step.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import posixpath
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import zstandard

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"
MEDIA_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # a zstd frame's first four bytes
# A layer whose files do not shrink by this fraction under zstd (a wheel's zip) is stored
# uncompressed: compressing would spend seconds to save 0.1%.
MIN_SAVING = 0.05
SAMPLE_BYTES = 1 << 20
MTIME = 0  # no build time in any byte; SOURCE_DATE_EPOCH is not needed
OWN_LAYER_BYTES = 1024 * 1024  # every wheel of 1 MiB or more: sharing below that saves little
# transformers:cpu's image: 247.7 MB, under the 259.1 MB of the packed PEX it replaced (level 3:
# 271.3 MB in 37% of the time; gzip -6: 324.1 MB in 3.5x the time). docs/benchmarks.md.
ZSTD_LEVEL = 6
RECORD_SUFFIX = ".dist-info/RECORD"  # an installed distribution's list of its files
RECORDS_GLOB = f"*/*{RECORD_SUFFIX}"  # those of site-packages/ (setuptools vendors others deeper down)


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


def _mode(path: Path, executable: bool | None = None) -> int:
    """0755 for directories and executable files, else 0644. `executable` None: any execute bit
    on disk (whoever runs the build) says so."""
    if executable is None:
        executable = bool(path.stat().st_mode & 0o111)
    return 0o755 if path.is_dir() or executable else 0o644


def _tarinfo(name: str, path: Path, executable: bool | None = None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = _mode(path, executable)
    if path.is_dir():
        info.type = tarfile.DIRTYPE
    else:
        info.size = path.stat().st_size
    return info


def _files(folder: Path) -> list[str]:
    """Every file under `folder`, relative and sorted; refuses symlinks."""
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())
    for f in files:
        if (folder / f).is_symlink():
            raise ValueError(f"{folder / f}: symlinks are not supported in a backend image (copy the file)")
    return files


def record_owners(records: dict[str, str]) -> dict[str, str]:
    """{folder path: the distribution that installed it (its `.dist-info` directory)}, from the
    text of each `<site-packages>/<name>.dist-info/RECORD` (keyed by its folder path): RECORD lists
    every file a distribution installed (package/scripts/install_wheel.py writes the .pyc too)."""
    owners = {}
    for record_path, text in sorted(records.items()):
        dist_info = record_path.rsplit("/", 1)[0]
        site = dist_info.rsplit("/", 1)[0] if "/" in dist_info else ""
        for row in csv.reader(io.StringIO(text)):
            if row and row[0] and not row[0].startswith("../"):
                owners[posixpath.join(site, row[0])] = dist_info
    return owners


def group_paths(
    sizes: dict[str, int], own_layer_bytes: int = OWN_LAYER_BYTES, own_layer_dirs: tuple[str, ...] = (), owners: dict[str, str] | None = None
) -> list[tuple[str, list[str]]]:
    """(history line, relative paths) per layer, from each file's size and the distribution that
    installed it (record_owners): each of `own_layer_dirs` whole (python/, the portable
    interpreter, identical in every image); then each installed distribution of `own_layer_bytes`
    or more (torch is the same layer in every image that carries it); the small distributions
    together (they change with the lock alone, so an edit of the backend's code re-tars none of
    them); each other big file alone; the rest (run.sh, records, the backend's own files)
    together. Pure, so the Pants rule groups from the digest's entries and RECORDs (image.py) and
    this script groups the same way."""
    files, owners = sorted(sizes), owners or {}
    layers = []
    for d in own_layer_dirs:
        group = [f for f in files if f.startswith(d.rstrip("/") + "/")]
        if group:
            layers.append((f"{d.rstrip('/')}/", group))
    placed = {f for _, group in layers for f in group}
    dists: dict[str, list[str]] = {}
    for f in files:
        if f not in placed and f in owners:
            dists.setdefault(owners[f], []).append(f)
    big_dists = sorted(d for d, group in dists.items() if sum(sizes[f] for f in group) >= own_layer_bytes)
    layers += [(d, dists[d]) for d in big_dists]
    locked = sorted(f for d, group in dists.items() if d not in big_dists for f in group)
    if locked:
        layers.append(("small locked distributions", locked))
    placed |= {f for group in dists.values() for f in group}
    rest = [f for f in files if f not in placed]
    layers += [(f, [f]) for f in rest if sizes[f] >= own_layer_bytes]
    small = [f for f in rest if sizes[f] < own_layer_bytes]
    if small:
        layers.append(("small files", small))
    return [("localai-build: " + label, group) for label, group in layers]


def is_distribution_record(path: str) -> bool:
    """A distribution's own RECORD, `<site-packages>/<name>.dist-info/RECORD` (RECORDS_GLOB), not
    one that a distribution vendors deeper down."""
    return path.endswith(RECORD_SUFFIX) and path.count("/") == 2


def folder_records(folder: Path, files: list[str]) -> dict[str, str]:
    """The RECORD files of the distributions installed in `folder`, as record_owners reads them."""
    return {f: (folder / f).read_text(encoding="utf-8") for f in files if is_distribution_record(f)}


def layer_groups(folder: Path, own_layer_bytes: int = OWN_LAYER_BYTES, own_layer_dirs: tuple[str, ...] = ()) -> list[tuple[str, list[str]]]:
    """group_paths of the files on disk."""
    files = _files(folder)
    owners = record_owners(folder_records(folder, files))
    return group_paths({f: (folder / f).stat().st_size for f in files}, own_layer_bytes, own_layer_dirs, owners)


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
    """Whether zstd saves MIN_SAVING on a sample of each file (deterministic: content only)."""
    raw = packed = 0
    compressor = _compressor()
    for p in paths:
        with (folder / p).open("rb") as f:
            # The start and the middle, each compressed alone: in a file under two samples long
            # they overlap, and zstd's window would count the overlap as a saving.
            for offset in (0, (folder / p).stat().st_size // 2):
                f.seek(offset)
                sample = f.read(SAMPLE_BYTES)
                raw += len(sample)
                packed += len(compressor.compress(sample))
    return raw == 0 or packed <= raw * (1 - MIN_SAVING)


def _compressor() -> zstandard.ZstdCompressor:
    # Single-threaded, no checksum, no content size: the frame's bytes depend only on the input.
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=0, write_checksum=False, write_content_size=False)


def open_layer(layer: IO[bytes]) -> tarfile.TarFile:
    """A layer blob (plain tar, tar+gzip or tar+zstd) as a tar read front to back: iterate it and
    read each member as it comes (tarfile's stream mode). `layer` must be seekable."""
    magic = layer.read(4)
    layer.seek(0)
    if magic == ZSTD_MAGIC:
        return tarfile.open(fileobj=zstandard.ZstdDecompressor().stream_reader(layer), mode="r|")
    return tarfile.open(fileobj=layer, mode="r|*")


def _write_tar(folder: Path, paths: list[str], out, executables: frozenset[str] | None) -> None:
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for d in _parents(paths):
            tar.addfile(_tarinfo(d, folder / d))
        for p in paths:
            with (folder / p).open("rb") as f:
                tar.addfile(_tarinfo(p, folder / p, None if executables is None else p in executables), f)


def write_layer(folder: Path, paths: list[str], blobs: Path, executables: frozenset[str] | None = None) -> tuple[Blob, str]:
    """One tar layer into blobs/ (named by its digest), zstd-compressed when that pays; returns it and its diff_id.

    `executables`: the paths that are executable, when the files' modes on disk do not say it
    (a sandbox: see layer_main); None reads the modes."""
    tmp = blobs / ".layer.tmp"
    compress = worth_compressing(folder, paths)
    with tmp.open("wb") as raw:
        stored = _HashingWriter(raw)
        if compress:
            with _compressor().stream_writer(stored, closefd=False) as zst:
                uncompressed = _HashingWriter(zst)
                _write_tar(folder, paths, uncompressed, executables)
        else:
            uncompressed = stored
            _write_tar(folder, paths, stored, executables)
    digest = "sha256:" + stored.h.hexdigest()
    tmp.rename(blobs / digest.split(":")[1])
    return Blob(MEDIA_LAYER if compress else MEDIA_LAYER_TAR, digest, stored.n), "sha256:" + uncompressed.h.hexdigest()


def _json_blob(blobs: Path, media_type: str, obj: dict) -> Blob:
    data = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    (blobs / digest.split(":")[1]).write_bytes(data)
    return Blob(media_type, digest, len(data))


@dataclass(frozen=True)
class Layer:
    """A layer blob already written, as the image's manifest and config name it."""

    blob: Blob
    diff_id: str
    created_by: str

    def to_json(self) -> dict:
        return {"media_type": self.blob.media_type, "digest": self.blob.digest, "size": self.blob.size, "diff_id": self.diff_id, "created_by": self.created_by}

    @classmethod
    def from_json(cls, d: dict) -> "Layer":
        return cls(Blob(d["media_type"], d["digest"], d["size"]), d["diff_id"], d["created_by"])


def write_layout(
    folder: Path,
    out: Path,
    *,
    ref_name: str,
    annotations: dict[str, str],
    own_layer_bytes: int = OWN_LAYER_BYTES,
    own_layer_dirs: tuple[str, ...] = (),
    architecture: str = "amd64",
) -> Image:
    """The OCI image layout of `folder` in `out` (created empty)."""
    check_run_sh(folder)
    blobs = out / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    layers = []
    for label, group in layer_groups(folder, own_layer_bytes, own_layer_dirs):
        blob, diff_id = write_layer(folder, group, blobs)
        layers.append(Layer(blob, diff_id, label))
    return write_image_files(out, layers, ref_name=ref_name, annotations=annotations)


def check_run_sh(folder: Path) -> None:
    if not (folder / "run.sh").is_file() or not (folder / "run.sh").stat().st_mode & 0o111:
        raise ValueError(f"{folder}: no executable run.sh at the folder root; LocalAI refuses such an image")


def write_image_files(out: Path, layers: list[Layer], *, ref_name: str, annotations: dict[str, str], architecture: str = "amd64") -> Image:
    """Config, manifest, oci-layout, index.json and the `docker save` manifest.json of an image
    whose layer blobs are written already (in out/blobs/sha256/, or elsewhere: image.py's steps)."""
    blobs = out / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    config = _json_blob(
        blobs,
        MEDIA_CONFIG,
        {
            "architecture": architecture,  # GOARCH spelling: amd64, arm64
            "os": "linux",
            "config": {"Entrypoint": ["/run.sh"], "Labels": dict(sorted(annotations.items()))},
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
            "history": [{"created_by": layer.created_by} for layer in layers],
        },
    )
    manifest = _json_blob(
        blobs,
        MEDIA_MANIFEST,
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": config.descriptor(),
            "layers": [layer.blob.descriptor() for layer in layers],
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
            "Layers": [f"blobs/sha256/{layer.blob.digest.split(':')[1]}" for layer in layers],
        }
    ]
    (out / "manifest.json").write_text(json.dumps(docker, sort_keys=True, separators=(",", ":")))
    return Image(manifest, config, tuple(layer.blob for layer in layers), tuple(layer.diff_id for layer in layers))


def write_tarball(layout: Path, dest: Path, layer_blobs: tuple[Path, ...] = ()) -> None:
    """The layout as one uncompressed tar (entries sorted, fixed metadata): ocifile:// and oci-archive:.
    `layer_blobs`: blob files kept outside `layout` (image.py's per-layer steps), archived under
    blobs/sha256/ by their file name as if they were in it."""
    where = {p.relative_to(layout).as_posix(): p for p in layout.rglob("*")}
    where.update({f"blobs/sha256/{blob.name}": blob for blob in layer_blobs})
    with dest.open("wb") as raw, tarfile.open(fileobj=raw, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for p in sorted(where):
            path = where[p]
            info = _tarinfo(p, path)
            info.mode = 0o755 if path.is_dir() else 0o644
            if path.is_dir():
                tar.addfile(info)
            else:
                with path.open("rb") as f:
                    tar.addfile(info, f)


def read_layout(layout: Path) -> tuple[dict, str]:
    """(manifest, manifest digest) of the one image in an OCI layout."""
    index = json.loads((layout / "index.json").read_text())
    desc = index["manifests"][0]
    data = (layout / "blobs/sha256" / desc["digest"].split(":")[1]).read_bytes()
    if "sha256:" + hashlib.sha256(data).hexdigest() != desc["digest"]:
        raise ValueError(f"{layout}: manifest blob does not match its digest {desc['digest']}")
    return json.loads(data), desc["digest"]


def _summary(image: Image, ref_name: str) -> str:
    summary = {
        "manifest_digest": image.manifest.digest,
        "manifest_size": image.manifest.size,
        "config_digest": image.config.digest,
        "layers": [{"digest": b.digest, "size": b.size, "diff_id": d} for b, d in zip(image.layers, image.diff_ids)],
        "ref_name": ref_name,
    }
    return json.dumps(summary, indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    """The whole image of a folder in one go: <out>/layout/, <out>/image.oci.tar, <out>/image.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the backend folder (run.sh at its root)")
    parser.add_argument("out", type=Path, help="writes <out>/layout/, <out>/image.oci.tar, <out>/image.json")
    parser.add_argument("--ref-name", required=True, help="org.opencontainers.image.ref.name, e.g. cpu-silero-vad")
    parser.add_argument("--annotation", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--own-layer-bytes", type=int, default=OWN_LAYER_BYTES)
    parser.add_argument("--own-layer-dir", action="append", default=[], help="a folder that gets one layer (repeatable)")
    parser.add_argument("--architecture", default="amd64", help="the config's architecture (amd64, arm64)")
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
        architecture=args.architecture,
    )
    write_tarball(layout, args.out / "image.oci.tar")
    (args.out / "image.json").write_text(_summary(image, args.ref_name))
    print(image.manifest.digest)
    return 0


def layer_main(argv: list[str]) -> int:
    """One layer of every file under a folder (image.py's per-layer step, cached by those files'
    digests): <out>/blobs/sha256/<hex> and <out>/layer.json (its descriptor, diff_id, history line)."""
    parser = argparse.ArgumentParser(description=layer_main.__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the layer's files, at their image paths")
    parser.add_argument("out", type=Path)
    parser.add_argument("--created-by", required=True, help="the layer's line in the config's history")
    # Pants hardlinks large files into a local sandbox from its store with execute bits the digest
    # does not have, while a remote worker writes the digest's own: only the digest's flags give
    # every executor the same layer.
    parser.add_argument("--executables", type=Path, help="a JSON list of the folder's executable files (else: modes on disk)")
    args = parser.parse_args(argv)
    blobs = args.out / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    executables = frozenset(json.loads(args.executables.read_text())) if args.executables else None
    blob, diff_id = write_layer(args.folder, _files(args.folder), blobs, executables)
    (args.out / "layer.json").write_text(json.dumps(Layer(blob, diff_id, args.created_by).to_json(), sort_keys=True))
    return 0


def image_main(argv: list[str]) -> int:
    """The image from layers written by layer_main: the small files of <out>/layout/ (config,
    manifest, index.json, oci-layout, manifest.json), <out>/image.oci.tar and <out>/image.json."""
    parser = argparse.ArgumentParser(description=image_main.__doc__.splitlines()[0])
    parser.add_argument("layers", type=Path, help="JSON list of layer_main's layer.json, in layer order")
    parser.add_argument("blobs", type=Path, help="a folder holding blob-<hex>/<hex> for each layer blob")
    parser.add_argument("out", type=Path)
    parser.add_argument("--ref-name", required=True)
    parser.add_argument("--annotation", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--architecture", default="amd64", help="the config's architecture (amd64, arm64)")
    parser.add_argument("--tarball", action="store_true", help="also write <out>/image.oci.tar (needs the blobs)")
    args = parser.parse_args(argv)
    layers = [Layer.from_json(d) for d in json.loads(args.layers.read_text())]
    layout = args.out / "layout"
    image = write_image_files(
        layout, layers, ref_name=args.ref_name, annotations=dict(a.split("=", 1) for a in args.annotation), architecture=args.architecture
    )
    if args.tarball:
        hexes = [layer.blob.digest.split(":")[1] for layer in layers]
        write_tarball(layout, args.out / "image.oci.tar", tuple(args.blobs / f"blob-{h}" / h for h in dict.fromkeys(hexes)))
    (args.out / "image.json").write_text(_summary(image, args.ref_name))
    return 0


def tarball_main(argv: list[str]) -> int:
    """image.oci.tar of a complete OCI layout (dist/images/<name>/<accel>/layout/), on demand: the
    bytes `pants package --localai-oci-tarball` writes."""
    parser = argparse.ArgumentParser(description=tarball_main.__doc__.splitlines()[0])
    parser.add_argument("layout", type=Path)
    parser.add_argument("dest", type=Path)
    args = parser.parse_args(argv)
    read_layout(args.layout)  # refuses a folder that is no image layout
    write_tarball(args.layout, args.dest)
    return 0


COMMANDS = {"layer": layer_main, "image": image_main, "tarball": tarball_main}

if __name__ == "__main__":
    command = COMMANDS.get(sys.argv[1]) if len(sys.argv) > 1 else None
    sys.exit(command(sys.argv[2:]) if command else main(sys.argv[1:]))
