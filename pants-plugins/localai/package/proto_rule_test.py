"""The stubs of an imported LocalAI folder, from the `grpc-stubs` resolve, against the variant's lock.

Real rules and processes, no mocks: the committed lockfiles/grpc-stubs.lock (grpcio-tools 1.71.0)
builds the grpcio-tools PEX and protoc compiles backends/proto/backend.proto. The variants' own
lockfiles hold only the versions the check reads (testutil.fake_lockfile): nothing is installed
from them. grpcio-tools 1.71.0 writes GRPC_GENERATED_VERSION = '1.71.0' into backend_pb2_grpc.py
and gencode 5.29.0 into backend_pb2.py (checked by hand on its wheel).
"""
from __future__ import annotations

import pytest
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.core.goals.package import BuiltPackage
from pants.engine.addresses import Address
from pants.engine.fs import Digest, DigestContents, PathGlobs
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from localai.model.artifact import BackendVariantFieldSet
from localai.package.proto import CompiledProto, StubRuntimeError, VariantStubsRequest
from localai.testutil import fake_lockfile, make_rule_runner, pex_cli_options, repo_file, repo_options

BACKEND_PY = "import backend_pb2, backend_pb2_grpc  # LocalAI's shape: top-level stubs\n"
# name -> (grpcio, protobuf) its fake lock holds. transformers: LocalAI's transformers folder at
# 82c191a (grpcio==1.83.0, protobuf==7.35.0), the pins no grpcio-tools wheel can join.
FOLDERS = {"transformers": ("1.83.0", "7.35.0"), "oldgrpc": ("1.70.0", "7.35.0"), "oldproto": ("1.83.0", "5.28.3")}


def folder(name: str, grpcio: str, protobuf: str) -> dict[str, str]:
    return {
        f"backends/localai/{name}/BUILD": 'localai_import(accelerators=["cpu"])\n',
        f"backends/localai/{name}/backend.py": BACKEND_PY,
        f"backends/localai/{name}/requirements.txt": f"grpcio=={grpcio}\nprotobuf=={protobuf}\n",
        f"lockfiles/localai-{name}-cpu.lock": fake_lockfile({"grpcio": (grpcio, []), "protobuf": (protobuf, [])}),
    }


@pytest.fixture(scope="module")
def rule_runner() -> RuleRunner:
    rule_runner = make_rule_runner(
        QueryRule(CompiledProto, [VariantStubsRequest]),
        QueryRule(DigestContents, [PathGlobs]),
        QueryRule(DigestContents, [Digest]),
        QueryRule(BuiltPackage, [BackendVariantFieldSet]),
    )
    rule_runner.write_files(
        {
            "3rdparty/accelerators.toml": repo_file("3rdparty/accelerators.toml"),
            "3rdparty/accelerators/cpu.txt": repo_file("3rdparty/accelerators/cpu.txt"),
            "3rdparty/grpc-stubs/BUILD": repo_file("3rdparty/grpc-stubs/BUILD"),
            "lockfiles/grpc-stubs.lock": repo_file("lockfiles/grpc-stubs.lock"),
            "backends/proto/backend.proto": repo_file("backends/proto/backend.proto"),
            "backends/proto/BUILD": 'localai_proto(name="proto", sources=["backend.proto"])\n',
            "backends/localai/common/BUILD": "localai_common()\n",
            "backends/localai/common/grpc_auth.py": "",
            **{k: v for name, pins in FOLDERS.items() for k, v in folder(name, *pins).items()},
        }
    )
    resolves = {"grpc-stubs": "lockfiles/grpc-stubs.lock", **{f"localai-{n}-cpu": f"lockfiles/localai-{n}-cpu.lock" for n in FOLDERS}}
    rule_runner.set_options(
        [
            *pex_cli_options(),
            *repo_options(),
            f"--python-resolves={resolves!r}",
            f"--python-resolves-to-constraints-file={ {f'localai-{n}-cpu': '3rdparty/accelerators/cpu.txt' for n in FOLDERS}!r}",
        ],
        env_inherit={"PATH", "PYENV_ROOT", "HOME"},
    )
    return rule_runner


def stubs(rule_runner: RuleRunner, name: str) -> dict[str, str]:
    proto = rule_runner.request(DigestContents, [PathGlobs(["backends/proto/backend.proto"])])
    sources = rule_runner.make_snapshot({"backend.proto": proto[0].content.decode()}).digest
    ics = InterpreterConstraints(["CPython==3.11.*"])
    request = VariantStubsRequest(f"backends/localai/{name}:cpu", f"localai-{name}-cpu", "grpc-stubs", ics, sources, ("backend.proto",))
    compiled = rule_runner.request(CompiledProto, [request])
    return {fc.path: fc.content.decode() for fc in rule_runner.request(DigestContents, [compiled.digest])}


def test_transformers_pins_get_stubs_from_the_stubs_tool(rule_runner) -> None:
    files = stubs(rule_runner, "transformers")
    assert set(files) == {"backend_pb2.py", "backend_pb2_grpc.py"}
    assert "GRPC_GENERATED_VERSION = '1.71.0'" in files["backend_pb2_grpc.py"]
    assert "# Protobuf Python Version: 5.29.0" in files["backend_pb2.py"]
    assert "class BackendServicer" in files["backend_pb2_grpc.py"]


def test_a_lock_with_an_older_grpcio_fails_packaging_naming_variant_versions_lockfile_and_fix(rule_runner) -> None:
    tgt = rule_runner.get_target(Address("backends/localai/oldgrpc", target_name="cpu"))
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(BuiltPackage, [BackendVariantFieldSet.create(tgt)])
    msg = str(e.value)
    assert "StubRuntimeError" in msg
    assert "backends/localai/oldgrpc:cpu: its gRPC stubs, from grpcio-tools 1.71.0 (resolve grpc-stubs)" in msg
    assert "lockfiles/localai-oldgrpc-cpu.lock locks grpcio 1.70.0, older than grpcio-tools 1.71.0" in msg
    assert "locks protobuf" not in msg  # protobuf 7.35.0 is no older than the gencode
    assert "Fix: pin in 3rdparty/grpc-stubs/BUILD a grpcio-tools no newer than the folder's grpcio" in msg
    assert "`./pants generate-lockfiles --resolve=grpc-stubs`" in msg


def test_a_lock_with_an_older_protobuf_than_the_gencode_fails(rule_runner) -> None:
    with pytest.raises(ExecutionError) as e:
        stubs(rule_runner, "oldproto")
    msg = str(e.value)
    assert StubRuntimeError.__name__ in msg
    assert ("lockfiles/localai-oldproto-cpu.lock locks protobuf 5.28.3, older than protobuf 5.29.0, the gencode "
            "version grpcio-tools 1.71.0's protoc stamps into *_pb2.py") in msg
    assert "locks grpcio" not in msg  # grpcio 1.83.0 is fine
