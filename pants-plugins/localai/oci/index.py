"""`pants package backends/<name>:<accel>-index`: one OCI image index for a variant's platforms.

`localai_backend(arm64=[accel])` declares it next to `:<accel>` and `:<accel>-arm64`. Its layout,
under dist/images/<name>/<accel>-index/layout/, holds both images' blobs and an image index
(application/vnd.oci.image.index.v1+json) naming each image manifest with the platform its
config states (os, architecture): what a registry client picks from by platform (LocalAI's
image pull, `skopeo --override-arch`). The index is canonical JSON of the two manifests, so it
is as reproducible as they are. image.json gives its digest and each platform's manifest.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact, PackageFieldSet
from pants.engine.addresses import Addresses, UnparsedAddressInputs
from pants.engine.fs import AddPrefix, CreateDigest, Digest, DigestContents, DigestSubset, FileContent, MergeDigests, PathGlobs, RemovePrefix
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import COMMON_TARGET_FIELDS, SpecialCasedDependencies, Target, Targets
from pants.engine.unions import UnionRule
from pants.util.logging import LogLevel
from pants.util.strutil import help_text

from localai.errors import LocalAIError
from localai.model.artifact import BackendVariantFieldSet
from localai.model.variant import BackendVariant, BackendVariantRequest, entry_name
from localai.oci.image import IMAGE_JSON, LAYOUT_DIR, image_dir
from localai.oci.scripts.layout import MEDIA_INDEX, MEDIA_MANIFEST

INDEX_SUFFIX = "-index"


class ImageIndexError(LocalAIError):
    pass


class ImageIndexVariantsField(SpecialCasedDependencies):
    alias = "variants"
    help = "The backend variants (one backend and accelerator, one per platform) whose images the index names."


class LocalAIImageIndexTarget(Target):
    alias = "localai_image_index"
    core_fields = (*COMMON_TARGET_FIELDS, ImageIndexVariantsField)
    help = help_text(
        """
        One OCI image index over a backend variant's images for several platforms (linux/amd64,
        linux/arm64), declared by `localai_backend(arm64=[...])` as `:<accelerator>-index`.
        """
    )


@dataclass(frozen=True)
class ImageIndexFieldSet(PackageFieldSet):
    required_fields = (ImageIndexVariantsField,)

    variants: ImageIndexVariantsField


def canonical(data: dict) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def blob_path(digest: str) -> str:
    return f"blobs/sha256/{digest.split(':', 1)[1]}"


@dataclass(frozen=True)
class ImageIndexPaths:
    backend: str
    accelerator: str

    @property
    def name(self) -> str:
        return self.accelerator + INDEX_SUFFIX

    @property
    def directory(self) -> str:
        return image_dir(self.backend, self.name)

    @property
    def ref_name(self) -> str:
        return entry_name(self.backend, self.name)


def index_document(manifests: list[tuple[str, int, str, str]]) -> bytes:
    """The image index of (manifest digest, size, os, architecture), ordered by architecture."""
    return canonical(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [
                {"mediaType": MEDIA_MANIFEST, "digest": d, "size": size, "platform": {"architecture": arch, "os": os_}}
                for d, size, os_, arch in sorted(manifests, key=lambda m: m[3])
            ],
        }
    )


@rule(desc="Package an OCI image index", level=LogLevel.INFO)
async def package_image_index(field_set: ImageIndexFieldSet) -> BuiltPackage:
    addresses = await Get(Addresses, UnparsedAddressInputs, field_set.variants.to_unparsed_address_inputs())
    variants = await MultiGet(Get(BackendVariant, BackendVariantRequest(a)) for a in addresses)
    pairs = {(v.variant.backend, v.variant.accelerator.name) for v in variants}
    platforms = [v.variant.platform.name for v in variants]
    if len(variants) < 2 or len(pairs) != 1 or len(set(platforms)) != len(platforms):
        raise ImageIndexError(
            f"{field_set.address}: an image index names one backend and accelerator on distinct platforms; its variants "
            f"are {', '.join(str(a) for a in addresses) or 'none'} ({', '.join(platforms)}). Fix its `variants` "
            "(the localai_backend macro declares it right)."
        )
    ((backend, accelerator),) = pairs
    paths = ImageIndexPaths(backend, accelerator)
    targets = await Get(Targets, Addresses, addresses)
    built = await MultiGet(Get(BuiltPackage, BackendVariantFieldSet, BackendVariantFieldSet.create(t)) for t in targets)
    manifests, blob_digests = [], []
    for v, package in zip(variants, built):
        layout = f"{image_dir(backend, v.variant.name)}/{LAYOUT_DIR}"
        blobs = await Get(Digest, DigestSubset(package.digest, PathGlobs([f"{layout}/blobs/**"])))
        blob_digests.append(await Get(Digest, RemovePrefix(blobs, layout)))
        index_json = await Get(DigestContents, DigestSubset(package.digest, PathGlobs([f"{layout}/index.json"])))
        desc = json.loads(index_json[0].content)["manifests"][0]
        manifest_file, = await Get(DigestContents, DigestSubset(package.digest, PathGlobs([f"{layout}/{blob_path(desc['digest'])}"])))
        config_digest = json.loads(manifest_file.content)["config"]["digest"]
        config_file, = await Get(DigestContents, DigestSubset(package.digest, PathGlobs([f"{layout}/{blob_path(config_digest)}"])))
        config = json.loads(config_file.content)
        manifests.append((desc["digest"], desc["size"], config["os"], config["architecture"]))
    index = index_document(manifests)
    digest = "sha256:" + hashlib.sha256(index).hexdigest()
    top = canonical(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [
                {"mediaType": MEDIA_INDEX, "digest": digest, "size": len(index),
                 "annotations": {"org.opencontainers.image.ref.name": paths.ref_name}}
            ],
        }
    )
    summary = json.dumps(
        {"manifest_digest": digest, "media_type": MEDIA_INDEX, "ref_name": paths.ref_name,
         "manifests": {f"{os_}/{arch}": d for d, _, os_, arch in manifests}},
        indent=2, sort_keys=True,
    ) + "\n"
    own = await Get(
        Digest,
        CreateDigest(
            [
                FileContent(f"{LAYOUT_DIR}/{blob_path(digest)}", index),
                FileContent(f"{LAYOUT_DIR}/index.json", top),
                FileContent(f"{LAYOUT_DIR}/oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                FileContent(IMAGE_JSON, summary.encode()),
            ]
        ),
    )
    blobs = await Get(Digest, AddPrefix(await Get(Digest, MergeDigests(blob_digests)), LAYOUT_DIR))
    out = await Get(Digest, AddPrefix(await Get(Digest, MergeDigests([own, blobs])), paths.directory))
    lines = (f"OCI image index {digest}", *(f"{os_}/{arch}: {d}" for d, _, os_, arch in manifests))
    return BuiltPackage(out, (BuiltPackageArtifact(f"{paths.directory}/", lines),))


def rules():
    return (*collect_rules(), UnionRule(PackageFieldSet, ImageIndexFieldSet))
