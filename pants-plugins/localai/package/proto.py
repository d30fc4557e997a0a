"""Compiles the gRPC interface with grpcio-tools taken from a backend variant's own lockfile.

Pants' protobuf backend downloads protoc from GitHub and generates code for one protobuf
version; here each variant's stubs come from the same lock as its grpcio/protobuf runtime, so
generated code and runtime cannot disagree (LocalAI's gencode/runtime mismatch bug).
"""
from __future__ import annotations

from dataclasses import dataclass

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

from localai.target_types import ProtoSourcesField

# Python tests (pants test) import the stubs too; they run in this resolve, so it is the one
# whose grpcio-tools generates their stubs.
TESTS_RESOLVE = "tests"
TESTS_INTERPRETER = "CPython==3.11.*"


@dataclass(frozen=True)
class CompileProtoRequest:
    resolve: str
    interpreter_constraints: InterpreterConstraints
    sources: Digest
    files: tuple[str, ...]  # .proto paths, relative to the build root


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
                ["grpcio-tools"],
                from_superset=Resolve(request.resolve, False),
                description_of_origin=f"the gRPC code generator of resolve {request.resolve}",
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
            description=f"Compile {', '.join(request.files)} with grpcio-tools from {request.resolve}",
        ),
    )
    return CompiledProto(result.output_digest)


class GeneratePythonFromLocalAIProtoRequest(GenerateSourcesRequest):
    input = ProtoSourcesField
    output = PythonSourceField


@rule(desc="Generate Python stubs for tests", level=LogLevel.DEBUG)
async def generate_python_for_tests(request: GeneratePythonFromLocalAIProtoRequest) -> GeneratedSources:
    compiled = await Get(
        CompiledProto,
        CompileProtoRequest(
            TESTS_RESOLVE,
            InterpreterConstraints([TESTS_INTERPRETER]),
            request.protocol_sources.digest,
            request.protocol_sources.files,
        ),
    )
    return GeneratedSources(await Get(Snapshot, Digest, compiled.digest))


def rules():
    return (*collect_rules(), UnionRule(GenerateSourcesRequest, GeneratePythonFromLocalAIProtoRequest))
