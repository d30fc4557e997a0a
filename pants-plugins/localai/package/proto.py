"""Compiles the gRPC interface with grpcio-tools taken from a backend variant's own lockfile.

Pants' protobuf backend downloads protoc from GitHub and generates code for one protobuf
version; here each variant's stubs come from the same lock as its grpcio/protobuf runtime, so
generated code and runtime cannot disagree (LocalAI's gencode/runtime mismatch bug).

The generated stubs depend only on the grpcio-tools release (its bundled protoc and gRPC plugin)
and the .proto files, so the compile is keyed on the locked `grpcio-tools==<version>`, the
interpreter and the sources, not on the variant: every variant whose lock pins the same
grpcio-tools shares one grpcio-tools PEX and one protoc run per Pants session.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pants.backend.python.target_types import EntryPoint, PythonSourceField
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import PexRequest, VenvPex, VenvPexProcess
from pants.backend.python.util_rules.pex_requirements import PexRequirements, Resolve
from pants.engine.fs import Digest, Snapshot
from pants.engine.process import ProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.engine.target import GeneratedSources, GenerateSourcesRequest
from pants.engine.unions import UnionRule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.lockfile import LockfileRequest, MaybeLockfile
from localai.model.variant import lockfile_path
from localai.target_types import ProtoSourcesField

# Python tests (pants test) import the stubs too; they run in this resolve, so it is the one
# whose grpcio-tools generates their stubs.
TESTS_RESOLVE = "tests"
TESTS_INTERPRETER = "CPython==3.11.*"


GRPCIO_TOOLS = "grpcio-tools"


class GrpcToolsNotLockedError(LocalAIError):
    pass


@dataclass(frozen=True)
class GrpcToolsPinRequest:
    resolve: str


@dataclass(frozen=True)
class GrpcToolsPin:
    requirement: str  # grpcio-tools==<version>, as the resolve's lockfile pins it


@rule(desc="Find the locked grpcio-tools", level=LogLevel.DEBUG)
async def grpcio_tools_pin(request: GrpcToolsPinRequest) -> GrpcToolsPin:
    path = lockfile_path(request.resolve)
    maybe = await Get(MaybeLockfile, LockfileRequest(path))
    versions = sorted({v for name, v in (maybe.lockfile.versions() if maybe.lockfile else ()) if name.lower() == GRPCIO_TOOLS})
    if len(versions) != 1:
        raise GrpcToolsNotLockedError(
            f"{path}: locks grpcio-tools at {versions or 'no version'}; the build compiles backend.proto with the one "
            f"grpcio-tools of resolve {request.resolve}. Fix: pin it in the requirements, then "
            f"`./pants generate-lockfiles --resolve={request.resolve}`."
        )
    return GrpcToolsPin(f"{GRPCIO_TOOLS}=={versions[0]}")


@dataclass(frozen=True)
class CompileProtoRequest:
    grpcio_tools: str  # grpcio-tools==<version>: with the sources, what the stubs depend on
    interpreter_constraints: InterpreterConstraints
    sources: Digest
    files: tuple[str, ...]  # .proto paths, relative to the build root
    # Where the pinned grpcio-tools is fetched from, not part of the key: any resolve that locks
    # the same version yields the same wheels and the same stubs, so the first one asked serves all.
    resolve: str = field(compare=False, hash=False, default="")


@dataclass(frozen=True)
class CompiledProto:
    digest: Digest


def generated_paths(proto_files: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(
        f"{path[: -len('.proto')]}{suffix}" for path in proto_files for suffix in ("_pb2.py", "_pb2_grpc.py")
    )


@rule(desc="Compile gRPC stubs", level=LogLevel.DEBUG)
async def compile_proto(request: CompileProtoRequest) -> CompiledProto:
    protoc = await Get(
        VenvPex,
        PexRequest(
            output_filename="grpcio-tools.pex",
            internal_only=True,
            requirements=PexRequirements(
                [request.grpcio_tools],
                from_superset=Resolve(request.resolve, False),
                description_of_origin=f"the gRPC code generator ({request.grpcio_tools}, from resolve {request.resolve})",
            ),
            interpreter_constraints=request.interpreter_constraints,
            main=EntryPoint("grpc_tools.protoc"),
        ),
    )
    result = await Get(
        ProcessResult,
        VenvPexProcess(
            protoc,
            argv=("-I.", "--python_out=.", "--grpc_python_out=.", *request.files),
            input_digest=request.sources,
            output_files=generated_paths(request.files),
            description=f"Compile {', '.join(request.files)} with {request.grpcio_tools}",
        ),
    )
    return CompiledProto(result.output_digest)


class GeneratePythonFromLocalAIProtoRequest(GenerateSourcesRequest):
    input = ProtoSourcesField
    output = PythonSourceField


@rule(desc="Generate Python stubs for tests", level=LogLevel.DEBUG)
async def generate_python_for_tests(request: GeneratePythonFromLocalAIProtoRequest) -> GeneratedSources:
    pin = await Get(GrpcToolsPin, GrpcToolsPinRequest(TESTS_RESOLVE))
    compiled = await Get(
        CompiledProto,
        CompileProtoRequest(
            pin.requirement,
            InterpreterConstraints([TESTS_INTERPRETER]),
            request.protocol_sources.digest,
            request.protocol_sources.files,
            resolve=TESTS_RESOLVE,
        ),
    )
    return GeneratedSources(await Get(Snapshot, Digest, compiled.digest))


def rules():
    return (*collect_rules(), UnionRule(GenerateSourcesRequest, GeneratePythonFromLocalAIProtoRequest))
