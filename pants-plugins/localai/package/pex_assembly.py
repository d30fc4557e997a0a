"""A packed-layout PEX built in two steps: its requirements (cached by the lock), then its sources.

pex has no incremental build: any change to a PEX's sources makes Pants run pex whole again,
which re-installs every locked wheel and hands Pants a new multi-hundred-MB output to capture.
Here the PEX is built as pex would build it in one go, in two steps:

1. the same `PexRequest` without sources: the requirements PEX (`.bootstrap`, `.deps/<wheel>`,
   `PEX-INFO`, `__main__.py`, `__pex__/__init__.py`), a pex process whose key holds no source
   file, so an edit of the backend's code is a cache hit;
2. in this rule, from digests and three small files: the sources added as loose files, and the
   three files that cover them recomputed the way pex 2.105.2 writes them (pex/pex_builder.py,
   `PEXBuilder._prepare_code`):
     PEX-INFO           `code_hash`: `CacheHelper.pex_code_hash` of the build chroot at that
                        point without `.bootstrap/` and `.deps/`, so of the sources: names, then
                        contents (sha1); `pex_hash`: sha1 of PEX-INFO's compact dump with
                        `code_hash` set, before `pex_hash` is (pex caches its runtime install under
                        pex_hash: a requirements PEX's PEX-INFO kept as it is would run stale code)
     __main__.py, __pex__/__init__.py   the bootstrap, which names pex_hash

For the same request the result is byte for byte pex's own one-shot build
(pex_assembly_rule_test.py compares both trees file by file). Only for the packed layout.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import posixpath
import re
from dataclasses import dataclass

from pants.backend.python.target_types import PexLayout
from pants.backend.python.util_rules.pex import Pex, PexRequest
from pants.engine.fs import EMPTY_DIGEST, AddPrefix, CreateDigest, Digest, DigestContents, DigestSubset, FileContent, MergeDigests, PathGlobs
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError

PEX_INFO = "PEX-INFO"
MAIN = "__main__.py"
IMPORT_HOOK = "__pex__/__init__.py"
# The chroot directories pex leaves out of code_hash (pex/layout.py BOOTSTRAP_DIR, DEPS_DIR).
NOT_CODE = (".bootstrap", ".deps")
# The files of a requirements PEX that name its code: replaced, everything else is kept.
CODE_FILES = (PEX_INFO, MAIN, IMPORT_HOOK)


class PexAssemblyError(LocalAIError):
    pass


@dataclass(frozen=True)
class SplitPexRequest:
    """A packed-layout PexRequest with sources, built as requirements PEX + sources."""

    request: PexRequest


def _hashed(name: str) -> bool:
    """pex's filters for its code hash (pex/common.py filter_pyc_*, util.py pex_code_hash): no
    __pycache__ directory, no bytecode, no file whose name starts with a dot."""
    parts = name.split("/")
    base = parts[-1]
    if "__pycache__" in parts[:-1] or base.startswith("."):
        return False
    return not base.endswith((".pyc", ".pyo")) and re.search(r"\.pyc\.[0-9]+$", base) is None


def pex_code_hash(files: dict[str, bytes]) -> str:
    """CacheHelper.pex_code_hash over files given as {relative path: content}: sha1 of the sorted
    names joined, then of each content in that order (pex/hashing.py dir_hash)."""
    names = sorted(n for n in files if _hashed(n))
    digest = hashlib.sha1()
    digest.update("".join(names).encode("utf-8"))
    for name in names:
        digest.update(files[name])
    return digest.hexdigest()


def _dump(info: dict) -> bytes:
    """PexInfo.dump(): sorted keys, compact separators (requirements and constraints are sorted
    already in the file pex wrote)."""
    return json.dumps(info, sort_keys=True, separators=(",", ":")).encode("utf-8")


def code_files(pex_info: bytes, main: bytes, import_hook: bytes, sources: dict[str, bytes], where: str) -> dict[str, bytes]:
    """PEX-INFO, __main__.py and __pex__/__init__.py of the PEX with `sources`, from the requirements
    PEX's own three files (pex_builder._prepare_code, in its order)."""
    info = json.loads(pex_info)
    old_hash = info.get("pex_hash")
    if not old_hash or old_hash.encode() not in main or old_hash.encode() not in import_hook:
        raise PexAssemblyError(
            f"{where}: the requirements PEX's {MAIN} or {IMPORT_HOOK} does not name its pex_hash {old_hash!r}: "
            "not the bootstrap pex 2.105.2 writes. Fix: check pex_assembly.py against the pex version of [pex-cli]."
        )
    clash = sorted(n for n in sources if n in CODE_FILES or n.split("/", 1)[0] in NOT_CODE)
    if clash:
        raise PexAssemblyError(f"{where}: sources {clash} would replace the PEX's own files. Fix: rename them.")
    info.pop("pex_hash")
    info["code_hash"] = pex_code_hash(sources)
    new_hash = hashlib.sha1(_dump(info)).hexdigest()
    info["pex_hash"] = new_hash
    return {
        PEX_INFO: _dump(info),
        MAIN: main.replace(old_hash.encode(), new_hash.encode()),
        IMPORT_HOOK: import_hook.replace(old_hash.encode(), new_hash.encode()),
    }


@rule(desc="Add sources to a requirements PEX", level=LogLevel.DEBUG)
async def build_split_pex(split: SplitPexRequest) -> Pex:
    request = split.request
    if request.layout != PexLayout.PACKED:
        raise PexAssemblyError(f"{request.output_filename}: a split PEX build needs the packed layout, not {request.layout}.")
    requirements_pex = await Get(Pex, PexRequest, dataclasses.replace(request, sources=None))
    if request.sources is None or request.sources == EMPTY_DIGEST:
        return requirements_pex
    root = request.output_filename
    own, sources = await MultiGet(
        Get(DigestContents, DigestSubset(requirements_pex.digest, PathGlobs([f"{root}/{f}" for f in CODE_FILES]))),
        Get(DigestContents, Digest, request.sources),
    )
    by_name = {posixpath.relpath(fc.path, root): fc for fc in own}
    missing = [f for f in CODE_FILES if f not in by_name]
    if missing:
        raise PexAssemblyError(f"{root}: the requirements PEX has no {', '.join(missing)}: not pex's packed layout.")
    written = code_files(
        by_name[PEX_INFO].content,
        by_name[MAIN].content,
        by_name[IMPORT_HOOK].content,
        {fc.path: fc.content for fc in sources},
        root,
    )
    kept, new_files, placed_sources = await MultiGet(
        Get(Digest, DigestSubset(requirements_pex.digest, PathGlobs([f"{root}/**", *(f"!{root}/{f}" for f in CODE_FILES)]))),
        Get(
            Digest,
            CreateDigest(
                FileContent(f"{root}/{name}", content, is_executable=by_name[name].is_executable) for name, content in written.items()
            ),
        ),
        Get(Digest, AddPrefix(request.sources, root)),
    )
    digest = await Get(Digest, MergeDigests([kept, new_files, placed_sources]))
    return Pex(digest, requirements_pex.name, requirements_pex.python)


def rules():
    return collect_rules()
