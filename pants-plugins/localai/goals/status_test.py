from __future__ import annotations

import pytest
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from localai.errors import LocalAIError
from localai.goals.status import (
    BASE_RPCS,
    StatusDoc,
    StatusRow,
    UseByTest,
    artifact_scope_section,
    proto_rpcs,
    render,
    served_rpcs,
)
from localai.testutil import backend_files, fake_lockfile, make_rule_runner, repo_file

PROTO = """
syntax = "proto3";
service Backend {
  rpc Health(HealthMessage) returns (Reply) {}
  rpc Predict(PredictOptions) returns (Reply) {}
  rpc PredictStream(PredictOptions) returns (stream Reply) {}
  rpc TTS(TTSRequest) returns (Result) {}
  rpc LoadModel(ModelOptions) returns (Result) {}
}
service Other {
  rpc Elsewhere(A) returns (B) {}
}
"""


def test_proto_rpcs_reads_only_the_backend_service() -> None:
    assert proto_rpcs(PROTO) == {"Health", "Predict", "PredictStream", "TTS", "LoadModel"}
    with pytest.raises(ValueError, match="no `service Backend"):
        proto_rpcs("service Nope {\n}")


def test_served_rpcs_are_servicer_methods_named_like_rpcs() -> None:
    source = '''
from backends.common.server import BaseServicer

class Helper:
    def TTS(self): ...          # not a servicer

class Base(BaseServicer):
    def Predict(self, request, context): ...
    def LoadModel(self, request, context): ...   # the base's: listed apart
    def load(self, request, path): ...           # not an RPC

class Mine(Base):
    async def PredictStream(self, request, context): ...
    def Elsewhere(self, request, context): ...   # not in service Backend
'''
    assert served_rpcs(source, proto_rpcs(PROTO)) == ("Predict", "PredictStream")


def test_served_rpcs_sees_a_servicer_named_like_its_imported_base() -> None:
    # LocalAI's own folders (backends/localai/embeddings-example) subclass the generated base
    # under the same name: the class is not its own base.
    source = '''
import backend_pb2_grpc

class BackendServicer(backend_pb2_grpc.BackendServicer):
    def Health(self, request, context): ...
    def Predict(self, request, context): ...
    def TTS(self, request, context): ...

class NotOne(backend_pb2_grpc.Helper):
    def PredictStream(self, request, context): ...
'''
    assert served_rpcs(source, proto_rpcs(PROTO)) == ("Predict", "TTS")


def test_a_serves_tag_must_name_a_runtime_package() -> None:
    use = UseByTest("tests:x", "tests", ("localai-serves:backends/a:cpu",), ("backends/a:cpu-arm64",))
    with pytest.raises(LocalAIError) as err:
        use.serves()
    message = str(err.value)
    assert message.startswith("tests:x: tests/BUILD: the tag 'localai-serves:backends/a:cpu' names backends/a:cpu")
    assert "runtime_package_dependencies ['backends/a:cpu-arm64']" in message and "Add 'backends/a:cpu'" in message
    old = UseByTest("tests:x", "tests", ("localai-serves-model",), ("backends/a:cpu",))
    with pytest.raises(LocalAIError, match="localai-serves:backends/a:cpu"):
        old.serves()
    ok = UseByTest("tests:x", "tests", ("localai-serves:backends/a:cpu", "other"), ("backends/a:cpu", "backends/b:cpu"))
    assert ok.serves() == ("backends/a:cpu",)


# A fake graph for compute_status: bark:cpu is served by a by-hand test only, kokoro:cpu by a test
# CI runs, which only asks Health of silero:cpu; vad:cpu has no test.
FAKE_BACKENDS = ("bark", "kokoro", "silero", "vad")
FAKE_TESTS = '''
python_tests(
    name="bark-by-hand",
    tags=["by-hand", "localai-serves:backends/bark:cpu", "localai-runs-level:avx512"],
    sources=["test_bark.py"],
    runtime_package_dependencies=["backends/bark:cpu"],
    description="By hand because it is slow. Loads a model in bark:cpu.",
)
python_tests(
    name="kokoro",
    tags=["localai-serves:backends/kokoro:cpu", "localai-runs-level:avx2"],
    sources=["test_kokoro.py"],
    runtime_package_dependencies=["backends/kokoro:cpu", "backends/silero:cpu"],
    description="Loads a model in kokoro:cpu; silero:cpu answers Health.",
)
'''


def _status_runner(tests_build: str = FAKE_TESTS):
    runner = make_rule_runner(QueryRule(StatusDoc, []))
    files = {
        "backends/proto/backend.proto": PROTO,
        "backends/common/cpu_levels.json": repo_file("backends/common/cpu_levels.json"),
        "tests/BUILD": tests_build,
        "tests/test_bark.py": "",
        "tests/test_kokoro.py": "",
    }
    for name in FAKE_BACKENDS:
        files.update(backend_files(name, {"cpu": ""}))
        files[f"lockfiles/{name}-cpu.lock"] = fake_lockfile({})
        files[f"backends/{name}/backend.py"] = "class S(BaseServicer):\n    def TTS(self, request, context): ...\n"
    runner.write_files(files)
    resolves = {f"{n}-cpu": f"lockfiles/{n}-cpu.lock" for n in FAKE_BACKENDS}
    pip = {f"{n}-cpu": "3rdparty/accelerators/cpu.txt" for n in FAKE_BACKENDS}
    runner.set_options(
        [
            "--python-enable-resolves",
            f"--python-resolves={resolves!r}",
            f"--python-resolves-to-constraints-file={pip!r}",
            # The test targets' sources are empty: no import parsing (it needs the pex tool).
            "--python-infer-imports=false",
            "--python-infer-conftests=false",
            "--python-infer-init-files=never",
        ]
    )
    return runner


def test_compute_status_counts_only_what_ci_serves() -> None:
    doc = _status_runner().request(StatusDoc, [])
    rows = {line.split(" | ")[0][2:]: line for line in doc.content.splitlines() if line.startswith("| ") and " | cpu | " in line}
    # columns: platforms, declared, locked, packaged, served in CI, CI no model, by hand, RPCs, note
    assert rows["bark"] == "| bark | cpu | linux_x86_64 | yes | yes | yes | no | no | model | TTS |  |"
    assert rows["kokoro"] == "| kokoro | cpu | linux_x86_64 | yes | yes | yes | yes | no | - | TTS |  |"
    assert rows["silero"] == "| silero | cpu | linux_x86_64 | yes | yes | yes | no | yes | - | TTS |  |"
    assert rows["vad"] == "| vad | cpu | linux_x86_64 | yes | yes | yes | no | no | - | TTS |  |"
    assert doc.by_hand_without_reason == ()
    # CPU levels: run by the CI test, by the by-hand one only, by none.
    assert "| avx2 | x86_64 | `tests:kokoro` | - |" in doc.content.splitlines()
    assert "| avx512 | x86_64 | no | `tests:bark-by-hand` |" in doc.content.splitlines()
    assert "| arm64-sve | aarch64 | no | - |" in doc.content.splitlines()
    # The catalog shows the by-hand test's reason.
    assert "**By hand, not in CI**" in doc.content and "By hand because it is slow." in doc.content


def test_compute_status_refuses_a_serves_tag_of_no_runtime_package_and_a_by_hand_test_without_reason() -> None:
    wrong = FAKE_TESTS.replace('"localai-serves:backends/kokoro:cpu"', '"localai-serves:backends/vad:cpu"')
    assert wrong != FAKE_TESTS
    with pytest.raises(ExecutionError) as err:
        _status_runner(wrong).request(StatusDoc, [])
    assert "tests:kokoro: tests/BUILD: the tag 'localai-serves:backends/vad:cpu' names backends/vad:cpu" in str(err.value)
    unexplained = FAKE_TESTS.replace("By hand because it is slow. ", "")
    assert unexplained != FAKE_TESTS
    assert _status_runner(unexplained).request(StatusDoc, []).by_hand_without_reason == ("tests:bark-by-hand",)


def test_the_committed_proto_declares_the_base_and_model_rpcs() -> None:
    rpcs = proto_rpcs(repo_file("backends/proto/backend.proto"))
    assert set(BASE_RPCS) | {"TTS", "Predict", "PredictStream", "Embedding", "Rerank", "VAD", "Detect"} <= rpcs


def test_render_marks_each_column() -> None:
    rows = [
        StatusRow("kokoro", "cpu", ("linux_x86_64",), True, True, True, False, True, ("TTS",), "", "model"),
        StatusRow("bark", "cpu", ("linux_x86_64", "linux_aarch64"), True, True, True, True, False, ("TTS",), ""),
        StatusRow("x", "rocm", ("linux_x86_64",), False, True, False, False, False, (), "lockfiles/x-rocm.lock is committed but ..."),
    ]
    lines = render(rows).splitlines()
    assert "| bark | cpu | linux_x86_64, linux_aarch64 | yes | yes | yes | yes | no | - | TTS |  |" in lines
    assert "| kokoro | cpu | linux_x86_64 | yes | yes | yes | no | yes | model | TTS |  |" in lines
    assert lines[-1].startswith("| x | rocm | linux_x86_64 | no | yes | no | no | no | - | - | lockfiles/x-rocm.lock")


def test_left_out_projects_and_host_libraries_are_listed_per_variant() -> None:
    from types import SimpleNamespace

    plain = SimpleNamespace(address="backends/a:cpu", exclude=(), host_libs={})
    assert artifact_scope_section([plain]) == ""
    vllm = SimpleNamespace(address="backends/vllm:cpu", exclude=("torchaudio", "triton"), host_libs={"libnuma.so.1": "why"})
    rows = [line for line in artifact_scope_section([plain, vllm]).splitlines() if line.startswith("| backends/")]
    assert rows == [
        "| backends/vllm:cpu | left out | torchaudio |",
        "| backends/vllm:cpu | left out | triton |",
        "| backends/vllm:cpu | required of the host | libnuma.so.1: why |",
    ]
