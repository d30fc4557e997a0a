"""Reading Pants/pex lockfiles: JSON after Pants' `//` header lines."""
from __future__ import annotations

import json
from typing import Any


def lockfile_json(content: bytes) -> dict[str, Any]:
    return json.loads("\n".join(l for l in content.decode().splitlines() if not l.startswith("//")))
