"""The files a provenance statement speaks of, read back from a backend folder or its OCI image,
and the check of the statement's subjects against them (`pants localai-verify`, goals/verify.py).

Where the files are read from:
  a backend folder         dist/backends/<name>/<accel>/ (the statement and envelope beside the artifact)
  an OCI image layout      dist/images/<name>/<accel>/layout/ (or the folder holding it)
  an OCI image tarball     dist/images/<name>/<accel>/image.oci.tar
An image's root is the backend folder (oci/scripts/layout.py), so both give the same paths. Every file is
hashed again here (sha256 of its bytes); nothing recorded at build time is trusted. A subject
that names a directory (backend.pex, a packed PEX) is checked by FileTree's recipe
(model/artifact.py tree_sha256) over the files under it.
"""
from __future__ import annotations

import hashlib
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator

import zstandard

from localai.errors import LocalAIError
from localai.model.artifact import tree_sha256
from localai.model.folder import ENVELOPE_NAME, PROVENANCE_NAME
from localai.oci.scripts.layout import open_layer

CHUNK = 1 << 20
SMALL_FILES = (ENVELOPE_NAME, PROVENANCE_NAME)  # kept as bytes, the rest only as sha256


class VerifyError(LocalAIError):
    pass


@dataclass(frozen=True)
class ArtifactFiles:
    where: str  # what was read, as the user named it: "dist/backends/x/cpu" or "<image>.oci.tar (OCI image)"
    sha256: dict[str, str]  # path relative to the folder root -> sha256 of its bytes
    small: dict[str, bytes]  # SMALL_FILES present, their bytes

    def digest_of(self, name: str) -> str | None:
        """A file's sha256, or a directory's tree sha256; None when nothing has that name."""
        if name in self.sha256:
            return self.sha256[name]
        prefix = name.rstrip("/") + "/"
        under = {p[len(prefix) :]: h for p, h in self.sha256.items() if p.startswith(prefix)}
        return tree_sha256(under) if under else None


def _sha256_of(f: IO[bytes]) -> str:
    h = hashlib.sha256()
    for chunk in iter(lambda: f.read(CHUNK), b""):
        h.update(chunk)
    return h.hexdigest()


def read_folder(folder: Path, where: str) -> ArtifactFiles:
    """Regular files only, as packaging counts them (FileTree skips links and empty directories)."""
    sha256, small = {}, {}
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        for name in files:
            path = Path(top) / name
            if path.is_symlink() or not path.is_file():
                continue
            rel = path.relative_to(folder).as_posix()
            if rel in SMALL_FILES:
                small[rel] = path.read_bytes()
                sha256[rel] = hashlib.sha256(small[rel]).hexdigest()
                continue
            with path.open("rb") as f:
                sha256[rel] = _sha256_of(f)
    return ArtifactFiles(where, sha256, small)


def _layer_files(layer: IO[bytes], sha256: dict[str, str], small: dict[str, bytes]) -> None:
    with open_layer(layer) as tar:
        for member in tar:
            if not member.isfile():
                continue
            rel, f = member.name.removeprefix("./"), tar.extractfile(member)
            if f is None:  # never for a regular file; typed Optional by tarfile
                continue
            if rel in SMALL_FILES:
                data = f.read()
                small[rel], sha256[rel] = data, hashlib.sha256(data).hexdigest()
            else:
                sha256[rel] = _sha256_of(f)


def _manifest_layers(read_blob, where: str) -> Iterator[str]:
    """The layer digests (hex) of the image's one manifest, from index.json."""
    try:
        index = json.loads(read_blob("index.json"))
        manifest_digest = index["manifests"][0]["digest"].split(":", 1)[1]
        manifest = json.loads(read_blob(f"blobs/sha256/{manifest_digest}"))
        yield from (layer["digest"].split(":", 1)[1] for layer in manifest["layers"])
    except (KeyError, IndexError, ValueError, FileNotFoundError) as e:
        raise VerifyError(f"is not an OCI image layout with one manifest ({e!r}).", file=where,
                          fix="Give the image folder `pants package` wrote (dist/images/<name>/<accel>/) or its image.oci.tar.") from None


def read_layout(layout: Path, where: str) -> ArtifactFiles:
    sha256, small = {}, {}
    for hexdigest in list(_manifest_layers(lambda p: (layout / p).read_bytes(), where)):
        with (layout / "blobs/sha256" / hexdigest).open("rb") as f:
            _layer_files(f, sha256, small)
    return ArtifactFiles(where, sha256, small)


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    """A file of the tarball, streamed (a layer may be gigabytes); FileNotFoundError when absent."""
    try:
        member = tar.extractfile(name)
    except KeyError:
        member = None
    if member is None:
        raise FileNotFoundError(name)
    return member


def read_tarball(path: Path, where: str) -> ArtifactFiles:
    sha256, small = {}, {}
    with tarfile.open(path, mode="r:") as outer:
        def read_blob(name: str) -> bytes:
            return _member(outer, name).read()

        for hexdigest in list(_manifest_layers(read_blob, where)):
            _layer_files(_member(outer, f"blobs/sha256/{hexdigest}"), sha256, small)
    return ArtifactFiles(where, sha256, small)


def read_artifact(path: Path, where: str) -> ArtifactFiles:
    """A backend folder, an OCI layout (or the image folder holding layout/), or an OCI tarball."""
    try:
        return _read_artifact(path, where)
    except (FileNotFoundError, tarfile.TarError, zstandard.ZstdError) as e:  # a layer the manifest names is absent or broken
        raise VerifyError(f"is an incomplete or broken OCI image ({e}).", file=where, fix="Package the backend again and verify what it wrote.") from None


def _read_artifact(path: Path, where: str) -> ArtifactFiles:
    if path.is_file():
        if not tarfile.is_tarfile(path):
            raise VerifyError("is a file but not a tarball.", file=where, fix="Give a backend folder, an OCI image folder or its image.oci.tar.")
        return read_tarball(path, f"{where} (OCI image)")
    if (path / "index.json").is_file():
        return read_layout(path, f"{where} (OCI image)")
    if (path / "layout" / "index.json").is_file():
        return read_layout(path / "layout", f"{where}/layout (OCI image)")
    if path.is_dir():
        return read_folder(path, where)
    raise VerifyError("does not exist.", file=where, fix="Give the folder `pants package` wrote: dist/backends/<name>/<accel>/ or dist/images/<name>/<accel>/.")


def check_subjects(statement: dict, files: ArtifactFiles) -> list[tuple[str, str]]:
    """(subject name, sha256) of each subject whose file matches; a VerifyError naming the first that does not."""
    subjects = statement.get("subject") or []
    if not subjects:
        raise VerifyError("the signed statement names no subject.", file=f"{files.where}/{ENVELOPE_NAME}",
                          fix="Sign the statement `pants package` writes (it lists the artifact and its records).")
    checked = []
    for subject in subjects:
        name, expected = subject.get("name", ""), (subject.get("digest") or {}).get("sha256", "")
        actual = files.digest_of(name)
        if actual is None:
            raise VerifyError(f"subject {name!r} of the signed statement is missing.", file=files.where,
                              fix="Verify the whole folder or image `pants package` wrote, or package it again.")
        if actual != expected:
            raise VerifyError(
                f"subject {name!r} was changed after signing: its sha256 is {actual}, the signed statement says {expected}.",
                file=f"{files.where}/{name}",
                fix="Do not use this artifact; package and sign it again from the source (`pants package`).",
            )
        checked.append((name, actual))
    return checked
