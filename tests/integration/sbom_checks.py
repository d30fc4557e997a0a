"""An SBOM checked as its readers would: CycloneDX's own strict JSON validator, then every
component that names a file of the folder (`localai:path`) against that file's sha256, and every
distribution and native library the folder carries against the components."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sbom(folder: Path) -> dict:
    """Validates folder/sbom.cdx.json and returns it; raises AssertionError naming what is wrong."""
    text = (folder / "sbom.cdx.json").read_text()
    error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(text)
    assert error is None, f"{folder}/sbom.cdx.json: CycloneDX 1.5 strict validation: {error}"
    sbom = json.loads(text)
    named = {}
    for c in sbom["components"]:
        paths = [p["value"] for p in c.get("properties", ()) if p["name"] == "localai:path"]
        for path in paths:
            if path.endswith("/"):  # python/: named by the archive it was unpacked from
                continue
            assert (folder / path).is_file(), f"{c['bom-ref']}: {path} is not in {folder}"
            sha = [h["content"] for h in c["hashes"] if h["alg"] == "SHA-256"]
            assert sha == [sha256_of(folder / path)], f"{c['bom-ref']}: sha256 of {path} differs from the SBOM's"
            named[path] = c
    inside = {p.relative_to(folder).as_posix() for p in (folder / "backend.pex/.deps").iterdir()}
    inside |= {p.relative_to(folder).as_posix() for p in (folder / "backend.pex").rglob("*.so") if ".deps" not in p.parts}
    assert inside <= set(named), f"{folder}: files inside with no component: {sorted(inside - set(named))}"
    for c in sbom["components"]:
        for ref in c.get("externalReferences", ()):
            assert "${" not in ref["url"], f"{c['bom-ref']}: {ref['url']} is a lockfile placeholder, not a URL"
    refs = {c["bom-ref"] for c in sbom["components"]} | {sbom["metadata"]["component"]["bom-ref"]}
    for d in sbom["dependencies"]:
        assert d["ref"] in refs and set(d.get("dependsOn", ())) <= refs, f"dependency on an unknown component: {d}"
    return sbom
