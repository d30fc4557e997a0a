"""A CycloneDX 1.5 SBOM of a backend artifact, from the lockfile it was built from.

Hand-written JSON that follows the CycloneDX 1.5 JSON schema (bom-1.5.schema.json): the plugin
runs inside Pants' own resolve, and a generator library would be one more lockfile to keep for
a document this small. Every locked package is a component with its version, its purl
(`pkg:pypi/<name>@<version>`) and, per locked artifact (wheel or sdist), an external reference
of type `distribution` carrying the artifact's URL and the lock's sha256. No timestamp and a
serial number derived from the content, so the SBOM is as reproducible as the artifact.
"""
from __future__ import annotations

import json
import uuid
from urllib.parse import quote

from localai.model.lockfile import LockedRequirement
from localai.model.records import canonical_json

SBOM_NAME = "sbom.cdx.json"
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


def engine_components(records: dict[str, dict], toolchain: tuple[LockedRequirement, ...]) -> tuple[dict, ...]:
    """Components of native engines carried in the artifact: each library (path -> its build
    record), the pinned C/C++ source archives they were compiled from (each record's `source`),
    and the locked toolchain (zig, cmake, ninja) that compiled them."""
    sources = {(src["url"], src["sha256"]) for rec in records.values() if (src := rec.get("source")) and src.get("url")}
    out = []
    for path, rec in sorted(records.items()):
        out.append(
            {
                "type": "library",
                "bom-ref": f"native:{path}",
                "name": f"{rec.get('name')}/{rec.get('cpu_level')}/{rec.get('library')}",
                "version": str(rec.get("ggml_version", "")),
                "hashes": [{"alg": "SHA-256", "content": rec["sha256"]}] if rec.get("sha256") else [],
                "properties": [{"name": "localai:path", "value": path}, {"name": "localai:target", "value": str(rec.get("target"))},
                               # what a machine needs to load it (/proc/cpuinfo flags)
                               {"name": "localai:cpu_flags", "value": " ".join(rec.get("cpu_flags", ()))}],
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
    extra_components: tuple[dict, ...] = (),
) -> bytes:
    """The SBOM of `artifact` (e.g. backend.pex), whose packages are `requirements` (from `lockfile`)."""
    components = [_component(r) for r in sorted(requirements, key=lambda r: r.project_name.lower())]
    components += list(extra_components)
    root_ref = f"localai-backend:{name}@{version}"
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
        "dependencies": [{"ref": root_ref, "dependsOn": [c["bom-ref"] for c in components]}],
    }
    serial = uuid.uuid5(_NAMESPACE, json.dumps(body, sort_keys=True))
    return canonical_json({"serialNumber": f"urn:uuid:{serial}", **body})
