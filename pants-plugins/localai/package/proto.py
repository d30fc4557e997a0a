"""Compiles the gRPC interface with a locked grpcio-tools, and checks the stubs against the runtime.

Pants' protobuf backend downloads protoc from GitHub and generates code for one protobuf
version; here a backend of this repository compiles its stubs with the grpcio-tools of its own
lock (its requirements.txt pins it), an imported LocalAI folder with the project's stubs tool,
the `grpc-stubs` resolve (3rdparty/grpc-stubs/BUILD): no single grpcio-tools release can join
every LocalAI folder's resolve (LocalAI's transformers pins protobuf==7.35.0, which no
grpcio-tools wheel accepts), and the stubs need none of its dependencies at run time.

The generated files check their runtime when imported, and the same rule is checked here, once,
against the variant's lock (`StubRuntimeFloor`, read from the generated files themselves):
  <name>_pb2_grpc.py  GRPC_GENERATED_VERSION = '<grpcio-tools version>'; it raises RuntimeError
                      when grpc._utilities.first_version_is_lower(grpc.__version__, that): the
                      runtime grpcio's major.minor.patch is lower
  <name>_pb2.py       _runtime_version.ValidateProtobufRuntimeVersion(Domain.PUBLIC, M, m, p, ...):
                      google.protobuf.runtime_version raises VersionError when the runtime's
                      (MAJOR, MINOR, PATCH) is lower than (M, m, p), the gencode version of the
                      tool's protoc (protobuf 6.33.5's and 7.35.0's runtimes set no upper bound)
A variant whose locked grpcio or protobuf is older fails `pants package`, naming both versions.

The generated stubs depend only on the grpcio-tools release (its bundled protoc and gRPC plugin)
and the .proto files, so the compile is keyed on the locked `grpcio-tools==<version>`, the
interpreter and the sources, not on the variant: every variant whose stubs come from the same
grpcio-tools shares one grpcio-tools PEX and one protoc run per Pants session.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pants.backend.python.target_types import EntryPoint, PythonSourceField
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import PexRequest, VenvPex, VenvPexProcess
from pants.backend.python.util_rules.pex_requirements import PexRequirements, Resolve
from pants.engine.fs import Digest, DigestContents, Snapshot
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
# The stubs tool of imported LocalAI folders: one grpcio-tools, locked in its own resolve.
STUBS_RESOLVE = "grpc-stubs"
STUBS_BUILD = "3rdparty/grpc-stubs/BUILD"
# What an imported folder's stubs are made from beyond its own closure (the CI matrix reads it).
STUBS_TOOL_FILES = (STUBS_BUILD, lockfile_path(STUBS_RESOLVE))


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


_GRPC_GENERATED = re.compile(r"^GRPC_GENERATED_VERSION = '([^']+)'", re.MULTILINE)
_PROTOBUF_GENCODE = re.compile(
    r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+),"
)


class StubRuntimeError(LocalAIError):
    pass


_RELEASE = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def release(version: str) -> tuple[int, int, int]:
    """major.minor.patch, the part of a version both runtime checks compare (missing parts are 0)."""
    m = _RELEASE.match(version)
    if not m:
        raise StubRuntimeError(f"cannot compare version '{version}' with the stubs' runtime floor: it starts with no number")
    return tuple(int(n or 0) for n in m.groups())  # type: ignore[return-value]


@dataclass(frozen=True)
class StubRuntimeFloor:
    """The oldest grpcio and protobuf the generated stubs import on, as their own checks state
    (None: the files check nothing, as grpcio-tools releases before those checks generate)."""

    grpcio: str | None
    protobuf: str | None

    @classmethod
    def of(cls, contents: DigestContents) -> "StubRuntimeFloor":
        grpcio, protobuf = set(), set()
        for fc in contents:
            text = fc.content.decode()
            if fc.path.endswith("_pb2_grpc.py"):
                grpcio.update(_GRPC_GENERATED.findall(text))
            elif fc.path.endswith("_pb2.py"):
                protobuf.update(".".join(m) for m in _PROTOBUF_GENCODE.findall(text))
        newest = lambda found: max(found, key=release) if found else None  # noqa: E731
        return cls(newest(grpcio), newest(protobuf))


def runtime_problems(floor: StubRuntimeFloor, locked: tuple[tuple[str, str], ...], lockfile: str, tool: str) -> tuple[str, ...]:
    """One sentence per runtime of ``lockfile`` that stubs generated by grpcio-tools ``tool`` refuse."""
    checks = (
        ("grpcio", floor.grpcio, f"older than grpcio-tools {tool}, which generated the stubs: *_pb2_grpc.py raises "
         "RuntimeError at import on an older grpcio (GRPC_GENERATED_VERSION = '{needed}')"),
        ("protobuf", floor.protobuf, f"older than protobuf {{needed}}, the gencode version grpcio-tools {tool}'s protoc "
         "stamps into *_pb2.py, which raises VersionError at import on an older protobuf runtime (ValidateProtobufRuntimeVersion)"),
    )
    problems = []
    for project, needed, why in checks:
        if needed is None:
            continue
        versions = sorted((v for name, v in locked if name.lower() == project), key=release)
        if not versions:
            problems.append(f"{lockfile} locks no {project}, which the stubs import ({needed} or newer)")
        elif release(versions[0]) < release(needed):
            problems.append(f"{lockfile} locks {project} {versions[0]}, " + why.format(needed=needed))
    return tuple(problems)


@dataclass(frozen=True)
class VariantStubsRequest:
    owner: str  # the variant's address, for errors
    resolve: str  # the variant's resolve: its lock holds the grpcio and protobuf the stubs run on
    tool_resolve: str  # the resolve whose locked grpcio-tools generates them
    interpreter_constraints: InterpreterConstraints
    sources: Digest
    files: tuple[str, ...]  # .proto paths, relative to the sources digest


@rule(desc="Compile a variant's gRPC stubs", level=LogLevel.DEBUG)
async def variant_stubs(request: VariantStubsRequest) -> CompiledProto:
    pin = await Get(GrpcToolsPin, GrpcToolsPinRequest(request.tool_resolve))
    compiled = await Get(
        CompiledProto,
        CompileProtoRequest(pin.requirement, request.interpreter_constraints, request.sources, request.files, resolve=request.tool_resolve),
    )
    floor = StubRuntimeFloor.of(await Get(DigestContents, Digest, compiled.digest))
    path = lockfile_path(request.resolve)
    maybe = await Get(MaybeLockfile, LockfileRequest(path))
    tool = pin.requirement.split("==", 1)[1]
    problems = runtime_problems(floor, maybe.lockfile.versions() if maybe.lockfile else (), path, tool)
    if not problems:
        return compiled
    if request.tool_resolve == STUBS_RESOLVE:
        fix = (
            f"pin in {STUBS_BUILD} a grpcio-tools no newer than the folder's grpcio whose protoc gencode is no newer "
            f"than its protobuf, then `./pants generate-lockfiles --resolve={STUBS_RESOLVE}` (the folder stays unchanged)"
        )
    else:
        fix = (
            "in the variant's requirement files, pin grpcio and protobuf no older than that, or an older grpcio-tools, "
            f"then `./pants generate-lockfiles --resolve={request.resolve}`"
        )
    raise StubRuntimeError(
        f"{request.owner}: its gRPC stubs, from grpcio-tools {tool} (resolve {request.tool_resolve}), need grpcio>="
        f"{floor.grpcio or '(any)'} and protobuf>={floor.protobuf or '(any)'}: " + "; ".join(problems) + f". Fix: {fix}."
    )


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
