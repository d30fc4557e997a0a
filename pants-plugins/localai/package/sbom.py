"""A CycloneDX 1.5 SBOM of a backend artifact: what is installed in it, from what packaging knows.

Hand-written JSON that follows the CycloneDX 1.5 JSON schema (bom-1.5.schema.json; the tests
check every SBOM they build with cyclonedx-python-lib's strict validator): the plugin runs inside
Pants' own venv, and a generator library would be one more dependency there for a document this
small.

One component per distribution installed in the folder's site-packages/ (FileTree.deps, one per
`.deps/<wheel>` of the PEX it was installed from), not per lock entry: a lock entry lists every
artifact (wheels for each platform, the sdist), the folder holds one. Its `hashes` are those of
its installed files (FileTree's recipe over the files its RECORD lists, which anyone can
recompute from the folder); `localai:path` is that RECORD; its `distribution` reference is the wheel as downloaded, with the lock's sha256 and a real URL
(a wheelhouse placeholder `file://${WHEELHOUSE}/...` is replaced by the original URL that
3rdparty/wheelhouse.toml records for that sha256). `dependencies` follow the lock's
requires_dists between installed components. No timestamp and a serial derived from the
content, so the SBOM is as reproducible as the artifact.
"""
from __future__ import annotations

import json
import re
import uuid
from typing import Iterable, Mapping
from urllib.parse import quote

from localai.model.lockfile import LockedRequirement
from localai.model.records import canonical_json

SPEC_VERSION = "1.5"
_NAMESPACE = uuid.UUID("6f0c5a3e-8f1e-4a52-9a57-1c3c3f0b8d21")  # this project's, for uuid5 serials


def purl(name: str, version: str) -> str:
    return f"pkg:pypi/{quote(name.lower().replace('_', '-'))}@{quote(version, safe='+')}"


def _component(req: LockedRequirement) -> dict:
    return {
        "type": "library",
        "bom-ref": purl(req.project_name, req.version),
        "name": req.project_name,
        "version": req.version,
        "purl": purl(req.project_name, req.version),
        "externalReferences": [
            {
                "type": "distribution",
                "url": a.url,
                "hashes": [{"alg": "SHA-256", "content": a.hash}],
            }
            for a in sorted(req.artifacts, key=lambda a: a.url)
            if a.algorithm == "sha256"
        ],
    }


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(pep508: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", pep508)
    return _normal(m.group(1)) if m else ""


def _iri(url: str, original_urls: Mapping[str, str], sha256: str) -> str | None:
    """A URL a reader can fetch: the lock's, unless it is a path-mapping placeholder
    (`file://${WHEELHOUSE}/...`, not an IRI), then the original URL of the same sha256."""
    if "${" not in url:
        return url
    return original_urls.get(sha256)


def installed_components(
    requirements: Iterable[LockedRequirement], deps: Iterable[tuple[str, str, str]], *, original_urls: Mapping[str, str]
) -> tuple[list[dict], list[dict]]:
    """(components, dependencies) of the installed distributions (FileTree.deps: wheel, tree sha256, RECORD path)."""
    by_version = {(_normal(r.project_name), r.version): r for r in requirements}
    by_name: dict[str, list[LockedRequirement]] = {}
    for r in requirements:
        by_name.setdefault(_normal(r.project_name), []).append(r)
    components, requires = [], {}
    for wheel, sha, record in sorted(deps):
        parts = wheel.split("-")
        req = next((r for r in by_name.get(_normal(parts[0]), ()) if r.artifact_named(wheel)), None)
        req = req or (by_version.get((_normal(parts[0]), parts[1])) if len(parts) > 1 else None)
        if req is None:  # not from the lock: still inside, so still listed, by its file
            components.append({"type": "library", "bom-ref": f"file:{record}", "name": wheel,
                               "hashes": [{"alg": "SHA-256", "content": sha}],
                               "properties": [{"name": "localai:path", "value": record}]})
            continue
        # The wheel it was installed from; built from the sdist when the lock had no such wheel.
        source = req.artifact_named(wheel) or next((a for a in req.artifacts if not a.url.endswith(".whl")), None)
        refs = []
        if source is not None and source.algorithm == "sha256" and (url := _iri(source.url, original_urls, source.hash)):
            refs.append({"type": "distribution", "url": url, "hashes": [{"alg": "SHA-256", "content": source.hash}],
                         "comment": "the wheel pex installed" if source.url.endswith(".whl") else "the sdist the wheel was built from"})
        ref = purl(req.project_name, req.version)
        components.append(
            {
                "type": "library",
                "bom-ref": ref,
                "name": req.project_name,
                "version": req.version,
                "purl": ref,
                "hashes": [{"alg": "SHA-256", "content": sha}],
                "externalReferences": refs,
                "properties": [{"name": "localai:path", "value": record}, {"name": "localai:wheel", "value": wheel},
                               *([{"name": "localai:lock_url", "value": source.url}] if source and "${" in source.url else [])],
            }
        )
        requires[ref] = {_requirement_name(d) for d in req.requires_dists}
    refs_by_name = {_normal(c["name"]): c["bom-ref"] for c in components if "purl" in c}
    dependencies = [
        {"ref": ref, "dependsOn": sorted(refs_by_name[n] for n in names if n in refs_by_name and refs_by_name[n] != ref)}
        for ref, names in sorted(requires.items())
    ]
    return components, dependencies


BUILT_FROM = "localai:built_from"  # property: the bom-ref of the source archive a library was compiled from


def engine_components(records: dict[str, dict], toolchain: tuple[LockedRequirement, ...], prefix: str = "") -> tuple[dict, ...]:
    """Components of native engines carried in the artifact: each library (its build record's
    path -> the record; the library is beside it, at `prefix/<dir>/<library>` in the folder), the
    pinned C/C++ source archives they were compiled from (each record's `source`), and the locked
    toolchain (zig, cmake, ninja) that compiled them."""
    sources = {(src["url"], src["sha256"]) for rec in records.values() if (src := rec.get("source")) and src.get("url")}
    out = []
    for path, rec in sorted(records.items()):
        lib = "/".join(p for p in (prefix, path.rsplit("/", 1)[0] if "/" in path else "", str(rec.get("library"))) if p)
        src = rec.get("source") or {}
        out.append(
            {
                "type": "library",
                "bom-ref": f"native:{lib}",
                "name": f"{rec.get('name')}/{rec.get('cpu_level')}/{rec.get('library')}",
                "version": str(rec.get("ggml_version", "")),
                "hashes": [{"alg": "SHA-256", "content": rec["sha256"]}] if rec.get("sha256") else [],
                "properties": [{"name": "localai:path", "value": lib}, {"name": "localai:target", "value": str(rec.get("target"))},
                               # what a machine needs to load it (/proc/cpuinfo flags)
                               {"name": "localai:cpu_flags", "value": " ".join(rec.get("cpu_flags", ()))},
                               *([{"name": BUILT_FROM, "value": f"source:{src['url']}"}] if src.get("url") else [])],
            }
        )
    for url, sha in sorted(sources):  # one per archive, however many CPU levels were built from it
        out.append(
            {
                "type": "library",
                "bom-ref": f"source:{url}",
                "name": url.rsplit("/", 1)[-1],
                "description": "C/C++ source archive (ggml) the native engines were compiled from",
                "externalReferences": [{"type": "distribution", "url": url, "hashes": [{"alg": "SHA-256", "content": sha}]}],
            }
        )
    for req in toolchain:
        c = _component(req)
        c["bom-ref"] = "toolchain:" + c["bom-ref"]
        c["scope"] = "excluded"  # built with, not shipped
        c["description"] = "build toolchain of the native engines"
        out.append(c)
    return tuple(out)


def cyclonedx_sbom(
    *,
    name: str,
    version: str,
    artifact: str,
    artifact_sha256: str,
    lockfile: str,
    lockfile_sha256: str,
    requirements: tuple[LockedRequirement, ...],
    deps: tuple[tuple[str, str, str], ...],
    original_urls: Mapping[str, str] = {},
    extra_components: tuple[dict, ...] = (),
) -> bytes:
    """The SBOM of `artifact` (site-packages), in which `deps` (FileTree.deps) are installed from
    `requirements` (from `lockfile`); `original_urls`: sha256 -> URL of wheelhouse files."""
    components, dependencies = installed_components(requirements, deps, original_urls=original_urls)
    components += list(extra_components)
    for c in extra_components:  # a native library depends on the source archive it was compiled from
        built_from = [p["value"] for p in c.get("properties", ()) if p["name"] == BUILT_FROM]
        if built_from:
            dependencies.append({"ref": c["bom-ref"], "dependsOn": built_from})
    root_ref = f"localai-backend:{name}@{version}"
    shipped = [c["bom-ref"] for c in components if c.get("scope") != "excluded" and not c["bom-ref"].startswith("source:")]
    body = {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {
            "component": {
                "type": "application",
                "bom-ref": root_ref,
                "name": name,
                "version": version,
                "hashes": [{"alg": "SHA-256", "content": artifact_sha256}],
                "properties": [
                    {"name": "localai:artifact", "value": artifact},
                    {"name": "localai:lockfile", "value": lockfile},
                    {"name": "localai:lockfile_sha256", "value": lockfile_sha256},
                ],
            },
            "tools": {"components": [{"type": "application", "name": "localai-build (pants-plugins/localai/package/sbom.py)"}]},
        },
        "components": components,
        "dependencies": [{"ref": root_ref, "dependsOn": shipped}, *dependencies],
    }
    serial = uuid.uuid5(_NAMESPACE, json.dumps(body, sort_keys=True))
    return canonical_json({"serialNumber": f"urn:uuid:{serial}", **body})
