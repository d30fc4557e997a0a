"""What every artifact's records share: the build record's name and the one canonical JSON writer.

Build records, SBOMs and provenance statements are hashed into each other (provenance names the
record's and SBOM's sha256), so they are written one way: sorted keys, two-space indent, a
final newline. Backends (package/) and engines (native/) both write `build-record.json`.
"""
from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()
