"""`pants localai-gallery`: LocalAI's backend gallery index (backend/index.yaml schema).

Writes dist/gallery/index.yaml: per backend a meta entry (YAML anchor) with name, alias, license,
icon, description, urls, tags and a `capabilities` map (LocalAI capability key -> concrete entry),
then one concrete entry per variant that merges the anchor and adds name (`<accel>-<backend>`,
e.g. `cpu-diffusers`), uri, sha256 and size.

Capability keys come from the accelerator matrix (3rdparty/accelerators.toml `capabilities`),
plus optional extra keys in backends/<name>/gallery.yaml; both are checked against the keys
LocalAI knows. sha256/size are of the artifact `pants package` built, read from
dist/backends/<name>/<accel>/metadata.json: the gallery describes the bytes that were built and
published, and does not rebuild multi-GB CUDA artifacts just to hash them. A metadata.json
made from another lockfile than the committed one is stale and refused.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # pants: no-infer-dep (PyYAML comes with pantsbuild.pants)

from pants.core.util_rules.distdir import DistDir
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, PathGlobs, Paths, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule
from pants.engine.target import AllTargets
from pants.option.option_types import StrOption
from pants.base.build_root import BuildRoot
from pants.util.frozendict import FrozenDict
from pants.util.strutil import help_text

from localai.accelerators import MATRIX_PATH
from localai.package import VariantLockfile, VariantLockfileRequest
from localai.target_types import AcceleratorField, NotLockableHereField, VersionField
from localai.variant import Variant, VariantRequest

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


class GalleryError(ValueError):
    pass


class GallerySubsystem(GoalSubsystem):
    name = "localai-gallery"
    help = help_text(
        f"""
        Write dist/{GALLERY_PATH}, a LocalAI backend gallery index of every backend variant
        with a lockfile, from artifacts built by `pants package` (dist/backends/<name>/<accel>/
        metadata.json). Variants without a lockfile are left out and listed on stderr.
        """
    )

    registry = StrOption(
        default="quay.io/go-skynet/local-ai-backends",
        help="Where the artifacts are published: the {registry} of --uri-format.",
    )
    uri_format = StrOption(
        default="{registry}:latest-{entry}",
        help=help_text(
            """
            Each concrete entry's `uri`. Placeholders: {registry}, {entry} (e.g. cpu-diffusers),
            {backend}, {accelerator}, {version}. For a plain URL prefix use e.g.
            `{registry}/{backend}/{accelerator}/`.
            """
        ),
    )


class GalleryGoal(Goal):
    subsystem_cls = GallerySubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


def entry_name(backend: str, accelerator: str) -> str:
    """LocalAI's naming of concrete entries: `<build>-<backend>` (cpu-diffusers, cuda12-diffusers)."""
    return f"{accelerator}-{backend}"


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
    sha256: str
    size: int


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
        "# the artifacts in dist/backends/. Do not edit.",
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
                f"  sha256: {_q(v.sha256)}",
                f"  size: {v.size}",
            ]
    return "\n".join(out) + "\n"


def read_artifact_metadata(root: Path, path: Path, address: str, lockfile: VariantLockfile) -> dict[str, Any]:
    """sha256/size of a built artifact from its metadata.json (path relative to the build root)."""
    fix = f"run `./pants package {address}`"
    if not (root / path).is_file():
        raise GalleryError(f"{address}: {path} is missing: the artifact has not been built. Fix: {fix}.")
    try:
        meta = json.loads((root / path).read_text())
        sha, size = meta["artifact_sha256"], int(meta["artifact_size"])
    except (ValueError, KeyError, TypeError) as e:
        raise GalleryError(f"{address}: {path} is not a metadata.json of `pants package` ({e!r}). Fix: {fix}.") from e
    if meta.get("lockfile_sha256") != lockfile.sha256:
        raise GalleryError(
            f"{address}: {path} is stale: it was built from another {lockfile.path} than the committed one "
            f"(sha256 {meta.get('lockfile_sha256')} != {lockfile.sha256}). Fix: {fix}."
        )
    return {"sha256": sha, "size": size}


@goal_rule
async def localai_gallery(
    console: Console,
    workspace: Workspace,
    all_targets: AllTargets,
    subsystem: GallerySubsystem,
    distdir: DistDir,
    build_root: BuildRoot,
) -> GalleryGoal:
    tgts = sorted(
        (t for t in all_targets if t.has_field(AcceleratorField) and t.has_field(NotLockableHereField)),
        key=lambda t: t.address.spec,
    )
    variants = await MultiGet(Get(Variant, VariantRequest(t.address, t[AcceleratorField].value)) for t in tgts)
    for v in variants:  # the matrix first: a wrong key is an input error, whatever dist/ holds
        for key in v.accelerator.capabilities:
            check_capability(
                key,
                f"{v.address} (accelerator '{v.accelerator.name}' in {MATRIX_PATH})",
                f"correct the accelerator's `capabilities` in {MATRIX_PATH}",
            )
    present = set((await Get(Paths, PathGlobs([v.lockfile for v in variants]))).files)
    kept = []
    for t, v in zip(tgts, variants):
        if v.lockfile in present:
            kept.append((t, v))
        else:
            why = t[NotLockableHereField].value or v.accelerator.lock_note or "not generated yet"
            console.print_stderr(f"left out {v.address}: no {v.lockfile} ({why})")
    lockfiles = await MultiGet(Get(VariantLockfile, VariantLockfileRequest(v, None)) for _, v in kept)
    dirs = sorted({v.directory for _, v in kept})
    extra = await Get(
        DigestContents, PathGlobs([f"{d}/{f}" for d in dirs for f in ("gallery.yaml", "backend.py")])
    )
    files = {fc.path: fc.content.decode() for fc in extra}

    problems, unbuilt, by_backend = [], [], {}
    for (t, v), lock in zip(kept, lockfiles):
        meta_path = distdir.relpath / "backends" / v.backend / v.accelerator.name / "metadata.json"
        try:
            art = read_artifact_metadata(build_root.pathlib_path, meta_path, str(v.address), lock)
        except GalleryError as e:
            problems.append(str(e))
            unbuilt.append(str(v.address))
            continue
        version = t[VersionField].value
        entry = entry_name(v.backend, v.accelerator.name)
        uri = subsystem.uri_format.format(
            registry=subsystem.registry.rstrip("/"), entry=entry, backend=v.backend,
            accelerator=v.accelerator.name, version=version,
        )
        by_backend.setdefault((v.backend, v.directory), []).append(
            GalleryVariant(v.backend, v.accelerator.name, str(v.address), v.accelerator.capabilities, uri, art["sha256"], art["size"])
        )
    if problems:
        raise GalleryError("\n".join(problems) + f"\nTo build them all: ./pants package {' '.join(unbuilt)}")
    backends = [
        (backend, directory, read_meta(backend, directory, files.get(f"{directory}/gallery.yaml"), files.get(f"{directory}/backend.py")), vs)
        for (backend, directory), vs in sorted(by_backend.items())
    ]
    content = render(backends)
    digest = await Get(Digest, CreateDigest([FileContent(GALLERY_PATH, content.encode())]))
    workspace.write_digest(digest, path_prefix=str(distdir.relpath))
    n = sum(len(vs) for *_, vs in backends)
    console.print_stdout(f"Wrote {distdir.relpath}/{GALLERY_PATH}: {len(backends)} backends, {n} variants")
    return GalleryGoal(exit_code=0)


def rules():
    return collect_rules()
