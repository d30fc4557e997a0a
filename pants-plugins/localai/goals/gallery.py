"""`pants localai-gallery <targets>`: LocalAI's backend gallery index (backend/index.yaml schema).

Writes dist/gallery/index.yaml for the backend variants given on the command line (like every
Pants goal: `./pants localai-gallery backends/silero-vad:cpu`, or `backends::` for all): per
backend a meta entry (YAML anchor) with name, alias, license, icon, description, urls, tags and
a `capabilities` map (LocalAI capability key -> concrete entry), then one concrete entry per
variant that merges the anchor and adds name (`<accel>-<backend>`, e.g. `cpu-diffusers`) and
`uri`: the variant's OCI image by digest, `<registry>/<repository>@sha256:...` from
[localai-oci], plus `mirrors` (the same digest in each [localai-oci].mirrors location). No
`sha256`: LocalAI checks it only for plain downloads, never for OCI images, whose digest is
the check. `pants localai-bundle` (bundle.py) writes the offline variant: `ocifile://` URIs.

Capability keys come from the accelerator matrix (3rdparty/accelerators.toml `capabilities`),
plus optional extra keys in backends/<name>/gallery.yaml; both are checked against the keys
LocalAI knows. The image digest is read from what `pants package` built,
dist/images/<name>/<accel>/image.json, checked against dist/backends/<name>/<accel>/
build-record.json: an artifact made from another lockfile than the committed one is refused.
A variant given with its cross-built siblings (`:cpu` and `:cpu-arm64`) is named by the digest
of their image index (`:cpu-index`, dist/images/<name>/<accel>-index/image.json), which must
name exactly the images built now; LocalAI's pull picks its own platform from it.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml  # pants: no-infer-dep (PyYAML comes with pantsbuild.pants)
from pants.base.build_root import BuildRoot
from pants.core.util_rules.distdir import DistDir
from pants.engine.addresses import Address
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, PathGlobs, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, collect_rules, goal_rule, rule
from pants.engine.target import Targets
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel
from pants.util.strutil import help_text

from localai.errors import LocalAIError
from localai.model.accelerators import MATRIX_PATH
from localai.model.folder import BUILD_RECORD
from localai.model.variant import BackendVariants, BackendVariantsRequest, Variant, entry_name, folder_path
from localai.oci.image import IMAGE_JSON, LAYOUT_DIR, image_dir
from localai.oci.index import INDEX_SUFFIX
from localai.oci.options import OciSubsystem

GALLERY_PATH = "gallery/index.yaml"  # under dist/
# The capability keys LocalAI's backend gallery uses (mudler/LocalAI backend/index.yaml).
LOCALAI_CAPABILITIES = (
    "default",
    "nvidia",
    "nvidia-cuda-12",
    "nvidia-cuda-13",
    "intel",
    "amd",
    "metal",
    "vulkan",
    "nvidia-l4t",
    "nvidia-l4t-cuda-12",
    "nvidia-l4t-cuda-13",
    "cpu",
    "metal-darwin-arm64",
)
META_FIELDS = ("alias", "license", "icon", "description", "urls", "tags")
GALLERY_YAML_FIELDS = (*META_FIELDS, "capabilities")


class GalleryError(LocalAIError):
    pass


class GallerySubsystem(GoalSubsystem):
    name = "localai-gallery"
    help = help_text(
        f"""
        Write dist/{GALLERY_PATH}, a LocalAI backend gallery index of the backend variants
        given (e.g. `backends::`) that have a lockfile, naming each variant's OCI image by
        digest in [localai-oci].registry, from what `pants package` built (dist/images/).
        Variants without a lockfile are left out and listed on stderr.
        """
    )



class GalleryGoal(Goal):
    subsystem_cls = GallerySubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


@dataclass(frozen=True)
class BackendMeta:
    """backends/<name>/gallery.yaml (optional) with defaults filled in."""

    fields: FrozenDict[str, Any]
    extra_capabilities: FrozenDict[str, str]  # LocalAI key -> accelerator name


def default_description(backend: str, backend_py: str | None) -> str:
    if backend_py:
        try:
            doc = ast.get_docstring(ast.parse(backend_py))
        except SyntaxError:
            doc = None
        if doc:
            return doc.strip().splitlines()[0]
    return f"LocalAI {backend} backend"


def read_meta(backend: str, directory: str, gallery_yaml: str | None, backend_py: str | None) -> BackendMeta:
    path = f"{directory}/gallery.yaml"
    data: dict[str, Any] = {}
    if gallery_yaml is not None:
        try:
            data = yaml.safe_load(gallery_yaml) or {}
        except yaml.YAMLError as e:
            raise GalleryError(f"{path}: not valid YAML: {e}") from e
        if not isinstance(data, dict):
            raise GalleryError(f"{path}: must be a mapping of {', '.join(GALLERY_YAML_FIELDS)}")
        unknown = sorted(set(data) - set(GALLERY_YAML_FIELDS))
        if unknown:
            raise GalleryError(
                f"{path}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(GALLERY_YAML_FIELDS)} "
                "(name is the folder name; uri, sha256 and size come from the build)"
            )
    fields = {
        "alias": data.get("alias", backend),
        "license": data.get("license", ""),
        "icon": data.get("icon", ""),
        "description": data.get("description") or default_description(backend, backend_py),
        "urls": tuple(data.get("urls", []) or []),
        "tags": tuple(data.get("tags", []) or []),
    }
    if not fields["icon"]:
        del fields["icon"]
    extra = data.get("capabilities", {}) or {}
    if not isinstance(extra, dict):
        raise GalleryError(f"{path}: capabilities must map a LocalAI capability key to an accelerator name")
    return BackendMeta(FrozenDict(fields), FrozenDict({str(k): str(v) for k, v in extra.items()}))


@dataclass(frozen=True)
class GalleryVariant:
    backend: str
    accelerator: str
    address: str
    capabilities: tuple[str, ...]
    uri: str
    mirrors: tuple[str, ...] = ()


def check_capability(key: str, where: str, fix: str) -> None:
    if key not in LOCALAI_CAPABILITIES:
        raise GalleryError(
            f"{where}: capability key '{key}' is not one LocalAI knows, so LocalAI would never pick "
            f"this variant. Known keys: {', '.join(LOCALAI_CAPABILITIES)}. Fix: {fix}"
        )


def capabilities_map(backend: str, directory: str, variants: list[GalleryVariant], meta: BackendMeta) -> dict[str, str]:
    """capability key -> concrete entry name, checked: known keys, no key served twice."""
    caps: dict[str, tuple[str, str]] = {}  # key -> (entry, who)
    for v in variants:
        for key in v.capabilities:
            check_capability(
                key,
                f"{v.address} (accelerator '{v.accelerator}' in {MATRIX_PATH})",
                f"correct the accelerator's `capabilities` in {MATRIX_PATH}",
            )
            if key in caps:
                raise GalleryError(
                    f"{v.address}: capability '{key}' is served by both {caps[key][1]} and {v.address}; "
                    f"each key must name one entry. Fix the accelerators' capabilities in {MATRIX_PATH}."
                )
            caps[key] = (entry_name(backend, v.accelerator), v.address)
    by_accel = {v.accelerator: v for v in variants}
    for key, accel in meta.extra_capabilities.items():
        where = f"{directory}/gallery.yaml"
        check_capability(key, where, f"use one of the known keys in {where}")
        if accel not in by_accel:
            raise GalleryError(
                f"{where}: capability '{key}' names accelerator '{accel}', which has no packaged variant "
                f"with a lockfile in this gallery (present: {', '.join(sorted(by_accel)) or 'none'})"
            )
        caps[key] = (entry_name(backend, accel), f"{where}")
    order = {k: i for i, k in enumerate(LOCALAI_CAPABILITIES)}
    return {k: caps[k][0] for k in sorted(caps, key=lambda k: order[k])}


def _q(value: Any) -> str:
    """A YAML scalar/flow value (JSON is valid YAML)."""
    return json.dumps(value)


def render(backends: list[tuple[str, str, BackendMeta, list[GalleryVariant]]]) -> str:
    """The index in LocalAI's style: a meta entry per backend with an anchor, concrete entries merging it."""
    out = [
        "# LocalAI backend gallery, generated by `./pants localai-gallery` from the build graph and",
        "# the images in dist/images/. Do not edit.",
        "---",
    ]
    for backend, directory, meta, variants in backends:
        caps = capabilities_map(backend, directory, variants, meta)
        out.append(f"- &{backend}")
        out.append(f"  name: {_q(backend)}")
        for k in META_FIELDS:
            if k in meta.fields:
                out.append(f"  {k}: {_q(meta.fields[k])}")
        out.append("  capabilities:")
        out += [f"    {k}: {_q(v)}" for k, v in caps.items()]
        for v in variants:
            out += [
                f"- !!merge <<: *{backend}",
                f"  name: {_q(entry_name(backend, v.accelerator))}",
                f"  uri: {_q(v.uri)}",
            ]
            if v.mirrors:
                out.append("  mirrors:")
                out += [f"    - {_q(m)}" for m in v.mirrors]
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class IndexMember:
    """A cross-built variant that the gallery names through the image index it shares with a GalleryTarget."""

    variant: str  # its name, e.g. cpu-arm64
    platform: str  # os/architecture of its image
    lockfile: str
    lockfile_sha256: str


@dataclass(frozen=True)
class GalleryTarget:
    """A variant the gallery covers, with what it needs to find and check the built image."""

    address: str
    backend: str
    directory: str
    accelerator: str
    capabilities: tuple[str, ...]
    version: str
    lockfile: str
    lockfile_sha256: str
    platform: str  # os/architecture of its image, e.g. linux/amd64
    # The same backend and accelerator on other platforms: the entry then names their image index.
    index_members: tuple[IndexMember, ...]


@dataclass(frozen=True)
class GalleryTargets:
    targets: tuple[GalleryTarget, ...]
    left_out: tuple[str, ...]  # "<address>: no <lockfile> (<why>)"
    meta: FrozenDict[str, BackendMeta]  # backend directory -> meta


@dataclass(frozen=True)
class GalleryTargetsRequest:
    addresses: tuple[Address, ...]


@rule(desc="Collect the gallery's backend variants", level=LogLevel.DEBUG)
async def gallery_targets(request: GalleryTargetsRequest) -> GalleryTargets:
    chosen = await Get(BackendVariants, BackendVariantsRequest(request.addresses))
    for v in chosen:  # the matrix first: a wrong key is an input error, whatever dist/ holds
        for key in v.variant.accelerator.capabilities:
            check_capability(
                key,
                f"{v.address} (accelerator '{v.variant.accelerator.name}' in {MATRIX_PATH})",
                f"correct the accelerator's `capabilities` in {MATRIX_PATH}",
            )
    left_out = [f"{v.address}: no {v.variant.lockfile} ({v.why_unlocked})" for v in chosen.unlocked()]
    kept = [(bv, bv.variant) for bv in chosen.locked() if not bv.variant.platform.cross]
    # One entry per capability key, so a cross-built variant is named through the image index it
    # shares with the build machine's variant (LocalAI's pull picks its own platform from it).
    members: dict[tuple[str, str], list[IndexMember]] = {}
    for bv in chosen.locked():
        if bv.variant.platform.cross:
            members.setdefault((bv.variant.backend, bv.variant.accelerator.name), []).append(
                IndexMember(bv.variant.name, oci_platform(bv.variant), bv.lockfile.path, bv.lockfile.sha256)
            )
    alone = set(members) - {(v.backend, v.accelerator.name) for _, v in kept}
    left_out += [
        f"{bv.address}: named through its image index with the build machine's variant, which was not given "
        f"(e.g. {bv.address.spec.rsplit(':', 1)[0]}:{bv.variant.accelerator.name})"
        for bv in chosen.locked() if (bv.variant.backend, bv.variant.accelerator.name) in alone and bv.variant.platform.cross
    ]
    dirs = sorted({v.directory for _, v in kept})
    extra = await Get(DigestContents, PathGlobs([f"{d}/{f}" for d in dirs for f in ("gallery.yaml", "backend.py")]))
    files = {fc.path: fc.content.decode() for fc in extra}
    meta = {}
    for _, v in kept:
        meta[v.directory] = read_meta(
            v.backend, v.directory, files.get(f"{v.directory}/gallery.yaml"), files.get(f"{v.directory}/backend.py")
        )
    return GalleryTargets(
        tuple(
            GalleryTarget(
                str(v.address), v.backend, v.directory, v.accelerator.name, v.accelerator.capabilities,
                bv.version, bv.lockfile.path, bv.lockfile.sha256, oci_platform(v),
                tuple(members.get((v.backend, v.accelerator.name), ())),
            )
            for bv, v in kept
        ),
        tuple(left_out),
        FrozenDict(meta),
    )


def oci_platform(variant: Variant) -> str:
    return f"linux/{variant.platform.oci_architecture}"


def _built_image(
    root: Path, distdir: Path, address: str, t: GalleryTarget, variant: str, lockfile: str, lockfile_sha256: str
) -> dict[str, Any]:
    """image.json of one variant's built image, checked against its build record's lockfile."""
    fix = f"run `./pants package {address}`"
    record_path = distdir / folder_path(t.backend, variant) / BUILD_RECORD
    image_path = distdir / image_dir(t.backend, variant) / IMAGE_JSON
    for path in (record_path, image_path):
        if not (root / path).is_file():
            raise GalleryError(f"{address}: {path} is missing: the artifact has not been built. Fix: {fix}.")
    try:
        record = json.loads((root / record_path).read_text())
        image = json.loads((root / image_path).read_text())
        image["manifest_digest"]
    except (ValueError, KeyError, TypeError) as e:
        raise GalleryError(f"{address}: {image_path} is not an image.json of `pants package` ({e!r}). Fix: {fix}.") from e
    if record.get("lockfile_sha256") != lockfile_sha256:
        raise GalleryError(
            f"{address}: {record_path} is stale: it was built from another {lockfile} than the committed one "
            f"(sha256 {record.get('lockfile_sha256')} != {lockfile_sha256}). Fix: {fix}."
        )
    return image


def read_built_image(root: Path, distdir: Path, t: GalleryTarget) -> dict[str, Any]:
    """The digest the entry names (the image's, or its image index's) and the image's layout (paths under root)."""
    image = _built_image(root, distdir, t.address, t, t.accelerator, t.lockfile, t.lockfile_sha256)
    layout = str(distdir / image_dir(t.backend, t.accelerator) / LAYOUT_DIR)
    if not t.index_members:
        return {"digest": image["manifest_digest"], "layout": layout}
    package = t.address.rsplit(":", 1)[0]
    expected = {t.platform: image["manifest_digest"]}
    for m in t.index_members:
        member = _built_image(root, distdir, f"{package}:{m.variant}", t, m.variant, m.lockfile, m.lockfile_sha256)
        expected[m.platform] = member["manifest_digest"]
    index_address = f"{t.address}{INDEX_SUFFIX}"
    index_path = distdir / image_dir(t.backend, t.accelerator + INDEX_SUFFIX) / IMAGE_JSON
    try:
        index = json.loads((root / index_path).read_text())
    except (OSError, ValueError) as e:
        raise GalleryError(f"{index_address}: {index_path} cannot be read ({e}). Fix: run `./pants package {index_address}`.") from e
    if index.get("manifests") != expected:
        raise GalleryError(
            f"{index_address}: {index_path} names {index.get('manifests')}, not the images built now ({expected}). "
            f"Fix: run `./pants package {index_address}`."
        )
    return {"digest": index["manifest_digest"], "layout": layout}


def build_index(
    gallery: GalleryTargets, root: Path, distdir: Path, uri_of: Callable[[GalleryTarget, dict[str, Any]], tuple[str, tuple[str, ...]]]
) -> tuple[str, list[tuple[GalleryTarget, dict[str, Any]]]]:
    """The index text, and each variant with its built image; uri_of gives (uri, mirrors)."""
    problems, unbuilt, by_backend, built = [], [], {}, []
    for t in gallery.targets:
        try:
            image = read_built_image(root, distdir, t)
        except GalleryError as e:
            problems.append(str(e))
            unbuilt.append(t.address)
            continue
        built.append((t, image))
        uri, mirrors = uri_of(t, image)
        by_backend.setdefault((t.backend, t.directory), []).append(
            GalleryVariant(t.backend, t.accelerator, t.address, t.capabilities, uri, mirrors)
        )
    if problems:
        raise GalleryError("\n".join(problems) + f"\nTo build them: ./pants package {' '.join(unbuilt)}")
    backends = [(b, d, gallery.meta[d], vs) for (b, d), vs in sorted(by_backend.items())]
    return render(backends), built


class NoTargetsError(LocalAIError):
    pass


def require_targets(gallery: GalleryTargets, goal: str) -> None:
    if not gallery.targets:
        raise NoTargetsError(
            f"`pants {goal}` was given no backend variant with a lockfile. Name the variants, e.g. "
            f"`./pants {goal} backends/silero-vad:cpu`, or `./pants {goal} backends::` for all of them."
            + ("\nLeft out: " + "; ".join(gallery.left_out) if gallery.left_out else "")
        )


@goal_rule
async def localai_gallery(
    console: Console,
    workspace: Workspace,
    targets: Targets,
    subsystem: GallerySubsystem,
    oci: OciSubsystem,
    distdir: DistDir,
    build_root: BuildRoot,
) -> GalleryGoal:
    gallery = await Get(GalleryTargets, GalleryTargetsRequest(tuple(t.address for t in targets)))
    for line in gallery.left_out:
        console.print_stderr(f"left out {line}")
    require_targets(gallery, GallerySubsystem.name)
    if not oci.registry:
        raise GalleryError(
            "The gallery names images by digest in a registry, and none is set. Fix: pass "
            "--localai-oci-registry=<host[:port]> (and --localai-oci-repository), the registry "
            "`./pants publish` pushes to; for an offline folder use `./pants localai-bundle`."
        )

    def uri_of(t: GalleryTarget, image: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
        return f"{oci.reference()}@{image['digest']}", tuple(f"{m.rstrip('/')}@{image['digest']}" for m in oci.mirrors)

    content, _ = build_index(gallery, build_root.pathlib_path, distdir.relpath, uri_of)
    digest = await Get(Digest, CreateDigest([FileContent(GALLERY_PATH, content.encode())]))
    workspace.write_digest(digest, path_prefix=str(distdir.relpath))
    n = len(gallery.targets)
    console.print_stdout(f"Wrote {distdir.relpath}/{GALLERY_PATH}: {len(gallery.meta)} backends, {n} variants")
    return GalleryGoal(exit_code=0)


def rules():
    return collect_rules()
