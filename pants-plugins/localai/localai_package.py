"""The PEX contents of an imported LocalAI folder, laid out as its backend.py expects.

    localai_backend/backend.py (+ the folder's other modules)   run as __main__ (its serve() on --addr)
    common/grpc_auth.py ...                                      LocalAI's helpers: backend.py's
                                                                 sys.path insert of <its dir>/../common
    backend_pb2.py, backend_pb2_grpc.py                          top level, as `import backend_pb2`
                                                                 expects; compiled from
                                                                 backends/proto with the variant's
                                                                 own grpcio-tools

The folder is `localai_backend`, not the backend's name: LocalAI's rerankers backend imports the
PyPI package `rerankers`, which a folder of that name would shadow.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.engine.fs import AddPrefix, Digest, DigestSubset, MergeDigests, PathGlobs, RemovePrefix
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import TransitiveTargets, TransitiveTargetsRequest
from pants.util.logging import LogLevel

from localai.localai_layout import COMMON_DIR
from localai.proto import CompiledProto, CompileProtoRequest
from localai.target_types import LocalAISourcesField, ProtoSourcesField
from localai.variant import Variant

BACKEND_DIR = "localai_backend"
# pex runs a module given without a function as __main__: LocalAI's `if __name__ == "__main__"`.
ENTRY_POINT = f"{BACKEND_DIR}.backend"


class LocalAIFolderError(ValueError):
    pass


@dataclass(frozen=True)
class LocalAIFolderSourcesRequest:
    variant: Variant
    resolve_ics: InterpreterConstraints


@dataclass(frozen=True)
class LocalAIFolderSources:
    digest: Digest


async def _moved(digest: Digest, files: list[str], strip: str, prefix: str) -> Digest:
    subset = await Get(Digest, DigestSubset(digest, PathGlobs(files)))
    return await Get(Digest, AddPrefix(await Get(Digest, RemovePrefix(subset, strip)), prefix))


@rule(desc="Assemble an imported LocalAI backend's sources", level=LogLevel.DEBUG)
async def assemble_localai_folder(request: LocalAIFolderSourcesRequest) -> LocalAIFolderSources:
    variant = request.variant
    transitive = await Get(TransitiveTargets, TransitiveTargetsRequest([variant.address]))
    py_targets = [t for t in transitive.closure if t.has_field(LocalAISourcesField)]
    proto_targets = [t for t in transitive.closure if t.has_field(ProtoSourcesField)]
    py, protos = await MultiGet(
        Get(SourceFiles, SourceFilesRequest([t[LocalAISourcesField] for t in py_targets])),
        Get(SourceFiles, SourceFilesRequest([t[ProtoSourcesField] for t in proto_targets])),
    )
    own_dir = variant.directory
    common_dir = str(PurePath(own_dir).parent / COMMON_DIR)
    own = [f for f in py.snapshot.files if str(PurePath(f).parent) == own_dir]
    common = [f for f in py.snapshot.files if str(PurePath(f).parent) == common_dir]
    if f"{own_dir}/backend.py" not in own:
        raise LocalAIFolderError(
            f"{variant.address}: {own_dir}/backend.py is missing: LocalAI runs backend.py. Fix: copy "
            f"LocalAI's folder unchanged, or remove the variant (`./pants localai-import` again)."
        )
    if len(protos.snapshot.files) != 1:
        raise LocalAIFolderError(
            f"{variant.address}: expected one .proto (backends/proto/backend.proto), got {protos.snapshot.files}"
        )
    (proto_path,) = protos.snapshot.files
    proto_dir = str(PurePath(proto_path).parent)
    # Compiled at the top level: `import backend_pb2`, and backend_pb2_grpc imports it as such.
    top_level_proto = await Get(Digest, RemovePrefix(protos.snapshot.digest, proto_dir))
    compiled = await Get(
        CompiledProto,
        CompileProtoRequest(
            variant.resolve, request.resolve_ics, top_level_proto, (PurePath(proto_path).name,)
        ),
    )
    own_digest = await _moved(py.snapshot.digest, own, own_dir, BACKEND_DIR)
    parts = [own_digest, compiled.digest]
    if common:
        parts.append(await _moved(py.snapshot.digest, common, common_dir, COMMON_DIR))
    return LocalAIFolderSources(await Get(Digest, MergeDigests(parts)))


def rules():
    return collect_rules()
