from __future__ import annotations

import pytest

from localai.goals.status import BASE_RPCS, StatusRow, proto_rpcs, render, served_rpcs
from localai.testutil import repo_file

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


def test_the_committed_proto_declares_the_base_and_model_rpcs() -> None:
    rpcs = proto_rpcs(repo_file("backends/proto/backend.proto"))
    assert set(BASE_RPCS) | {"TTS", "Predict", "PredictStream", "Embedding", "Rerank", "VAD", "Detect"} <= rpcs


def test_render_marks_each_column() -> None:
    rows = [
        StatusRow("kokoro", "cpu", ("linux_x86_64",), True, True, True, False, True, ("TTS",), ""),
        StatusRow("bark", "cpu", ("linux_x86_64", "linux_aarch64"), True, True, True, True, False, ("TTS",), ""),
        StatusRow("x", "rocm", ("linux_x86_64",), False, True, False, False, False, (), "lockfiles/x-rocm.lock is committed but ..."),
    ]
    lines = render(rows).splitlines()
    assert "| bark | cpu | linux_x86_64, linux_aarch64 | yes | yes | yes | yes | no | TTS |  |" in lines
    assert "| kokoro | cpu | linux_x86_64 | yes | yes | yes | no | yes | TTS |  |" in lines
    assert lines[-1].startswith("| x | rocm | linux_x86_64 | no | yes | no | no | no | - | lockfiles/x-rocm.lock")
