"""An SBOM checked as its readers would: CycloneDX's own strict JSON validator, then every
component that names a file of the folder (`localai:path`) against that file's sha256, or, for an
installed distribution (its `.dist-info/RECORD`), against the sha256 of the `sha256sum` listing
of the files its RECORD lists, and every distribution and native library the folder carries
against the components."""
from __future__ import annotations

import csv
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


def record_files(record: Path) -> list[str]:
    """The files a RECORD lists, relative to the site-packages it is in (csv, first column)."""
    return [row[0] for row in csv.reader(record.read_text().splitlines()) if row and not row[0].startswith("../")]


def listing_sha256(root: Path, files: list[str]) -> str:
    """sha256 of `sha256sum`'s output for `files` under `root`, sorted (LC_ALL=C): coreutils' view."""
    lines = "".join(f"{sha256_of(root / f)}  {f}\n" for f in sorted(files))
    return hashlib.sha256(lines.encode()).hexdigest()


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
            if path.endswith(".dist-info/RECORD"):
                site = (folder / path).parent.parent
                want = listing_sha256(site, record_files(folder / path))
            else:
                want = sha256_of(folder / path)
            assert sha == [want], f"{c['bom-ref']}: sha256 of {path} differs from the SBOM's"
            named[path] = c
    site = folder / "site-packages"
    records = sorted(site.glob("*.dist-info/RECORD"))
    owned = {f for r in records for f in record_files(r)}
    inside = {r.relative_to(folder).as_posix() for r in records}
    inside |= {p.relative_to(folder).as_posix() for p in site.rglob("*.so") if p.relative_to(site).as_posix() not in owned}
    assert inside <= set(named), f"{folder}: files inside with no component: {sorted(inside - set(named))}"
    for c in sbom["components"]:
        for ref in c.get("externalReferences", ()):
            assert "${" not in ref["url"], f"{c['bom-ref']}: {ref['url']} is a lockfile placeholder, not a URL"
    refs = {c["bom-ref"] for c in sbom["components"]} | {sbom["metadata"]["component"]["bom-ref"]}
    for d in sbom["dependencies"]:
        assert d["ref"] in refs and set(d.get("dependsOn", ())) <= refs, f"dependency on an unknown component: {d}"
    return sbom
