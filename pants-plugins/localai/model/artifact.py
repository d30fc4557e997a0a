"""A variant's packaged artifact as packaging and the audit both see it."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pants.core.goals.package import PackageFieldSet
from pants.core.util_rules.environments import EnvironmentField
from pants.engine.addresses import Address
from pants.engine.fs import Digest, FileEntry

from localai.target_types import AcceleratorField


@dataclass(frozen=True)
class BackendVariantFieldSet(PackageFieldSet):
    # The variant's settings are read through variant.BackendVariant, their one reader.
    required_fields = (AcceleratorField,)

    accelerator: AcceleratorField
    # The variant builds in this environment (remote workers under pants.remote.toml).
    environment: EnvironmentField


DEPS = ".deps/"


@dataclass(frozen=True)
class FileTree:
    """A directory as one artifact (a packed PEX, site-packages/): its sha256 is that of
    `sha256sum`'s listing of its files, so anyone can recompute it with coreutils:
        cd site-packages && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum
    """

    sha256: str
    size: int
    # The distributions in it. A packed PEX built with --no-pre-install-wheels keeps each locked
    # wheel as downloaded, `.deps/<wheel file name>`: (that name, its sha256). site-packages/
    # (package/install.py): (that name, the tree sha256 of its installed files, its RECORD's path).
    deps: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def of(cls, entries, root: str) -> "FileTree":
        files = sorted(
            (e.path[len(root) + 1 :], e.file_digest) for e in entries if isinstance(e, FileEntry) and e.path.startswith(root + "/")
        )
        deps = tuple((path[len(DEPS) :], d.fingerprint) for path, d in files if path.startswith(DEPS) and "/" not in path[len(DEPS) :])
        return cls(tree_sha256({path: d.fingerprint for path, d in files}), sum(d.serialized_bytes_length for _, d in files), deps)


def tree_sha256(files: dict[str, str]) -> str:
    """The sha256 of a directory as FileTree defines it, from its files' paths (relative to it) and
    sha256s: that of the `sha256sum` listing, sorted by path (LC_ALL=C). One recipe for packaging
    and for `pants localai-verify`, which recomputes it from the folder or the image."""
    listing = "".join(f"{files[path]}  {path}\n" for path in sorted(files))
    return hashlib.sha256(listing.encode()).hexdigest()


@dataclass(frozen=True)
class BackendPex:
    digest: Digest  # backend.pex/ at the digest root
    tree: FileTree


@dataclass(frozen=True)
class VariantPexRequest:
    """The backend PEX of a variant as `pants package` builds it (package/backend.py), for the
    audit (`pants lint`), which needs no more of the folder."""

    address: Address
