"""backend.proto is LocalAI's wire interface: pinned to the committed wire facts, and the
comparison that `pants localai-proto-diff` prints, on protos written here."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from backends.proto import wire

HERE = Path(__file__).parent
FACTS = json.loads((HERE / "wire_facts.json").read_text())


def test_backend_proto_declares_exactly_localai_s_wire_facts():
    changes = wire.diff(FACTS, wire.facts_from_proto(HERE / "backend.proto"))
    assert not changes, "backend.proto drifted from wire_facts.json:\n" + "\n".join(map(str, changes))
    # Declaration order too (the rendered file follows LocalAI's).
    assert wire.facts_from_proto(HERE / "backend.proto") == FACTS


def test_facts_hold_what_localai_s_proto_is_known_to_have():
    # Independent facts (LocalAI 82c191a): 52 RPCs; TranscriptWord is start=1 int64,
    # end=2 int64, text=3 string; Detect takes DetectOptions; four bidirectional streams.
    assert len(FACTS["rpcs"]) == 52
    word = next(m for m in FACTS["messages"] if m["name"] == "TranscriptWord")
    assert word["fields"] == [
        {"number": 1, "name": "start", "type": "int64"},
        {"number": 2, "name": "end", "type": "int64"},
        {"number": 3, "name": "text", "type": "string"},
    ]
    rpcs = {r["name"]: r for r in FACTS["rpcs"]}
    assert (rpcs["Detect"]["request"], rpcs["Detect"]["response"]) == ("DetectOptions", "DetectResponse")
    bidi = sorted(r["name"] for r in FACTS["rpcs"] if r["client_streaming"] and r["server_streaming"])
    assert bidi == ["AudioToAudioStream", "AudioTranscriptionLive", "AudioTransformStream", "Forward"]


def test_rendering_the_facts_compiles_back_to_the_same_facts(tmp_path):
    out = tmp_path / "rendered.proto"
    out.write_text(wire.render_proto(FACTS))
    assert wire.facts_from_proto(out) == FACTS


BASE = """
syntax = "proto3";
package backend;
service Backend {
  rpc Health(HealthMessage) returns (Reply) {}
  rpc PredictStream(PredictOptions) returns (stream Reply) {}
}
message HealthMessage {}
message Reply { bytes message = 1; }
message PredictOptions {
  string Prompt = 1;
  optional float temperature = 2;
  map<string, string> Metadata = 3;
  enum Mode { A = 0; B = 1; }
  Mode mode = 4;
}
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run_diff(tmp_path, theirs):
    ours = write(tmp_path, "ours.proto", BASE)
    other = write(tmp_path, "theirs.proto", theirs)
    return subprocess.run(
        [sys.executable, "-m", "backends.proto.wire", "diff", str(ours), str(other)],
        capture_output=True, text=True,
    )


def test_additions_are_compatible(tmp_path):
    theirs = BASE.replace(
        "rpc Health(HealthMessage) returns (Reply) {}",
        "rpc Health(HealthMessage) returns (Reply) {}\n  rpc Detect(HealthMessage) returns (Reply) {}",
    ).replace("Mode mode = 4;", "Mode mode = 4;\n  string ModelIdentity = 5;").replace("B = 1;", "B = 1; C = 2;")
    result = run_diff(tmp_path, theirs)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "+ enum value PredictOptions.Mode.C: 2",
        "+ field PredictOptions#5: 5 string ModelIdentity",
        "+ rpc Detect: (HealthMessage) returns (Reply)",
    ]


@pytest.mark.parametrize(
    "old, new, named",
    [
        ("string Prompt = 1;", "bytes Prompt = 1;", "~ field PredictOptions#1: 1 string Prompt -> 1 bytes Prompt"),
        ("string Prompt = 1;", "string prompt = 1;", "~ field PredictOptions#1: 1 string Prompt -> 1 string prompt"),
        ("optional float temperature = 2;", "float temperature = 2;", "~ field PredictOptions#2"),
        (
            "map<string, string> Metadata = 3;",
            "map<string, bytes> Metadata = 3;",
            "~ field PredictOptions#3: 3 map<string, string> Metadata -> 3 map<string, bytes> Metadata",
        ),
        ("returns (stream Reply)", "returns (Reply)", "~ rpc PredictStream: (PredictOptions) returns (stream Reply) -> (PredictOptions) returns (Reply)"),
        ("  rpc Health(HealthMessage) returns (Reply) {}\n", "", "- rpc Health"),
        ("B = 1;", "B = 2;", "~ enum value PredictOptions.Mode.B: 1 -> 2"),
    ],
)
def test_incompatible_changes_are_named_and_fail(tmp_path, old, new, named):
    assert old in BASE
    result = run_diff(tmp_path, BASE.replace(old, new))
    assert result.returncode == 1, result.stdout + result.stderr
    assert any(line.startswith(named) and line.endswith("(wire-incompatible)") for line in result.stdout.splitlines()), result.stdout


def test_a_proto_that_does_not_compile_is_an_error_naming_it(tmp_path):
    result = run_diff(tmp_path, "syntax = \"proto3\"; message {")
    assert result.returncode == 2 and "theirs.proto" in result.stderr


def test_facts_file_markdown_is_read(tmp_path):
    md = textwrap.dedent(
        """\
        package `backend`, syntax proto3.
        ## service Backend (1 RPCs)
        | rpc | request | response |
        |---|---|---|
        | Live | stream In | stream Out |
        ## enum Layout
        - A = 0, B = 1
        ## message In
        - enum State: X = 0, Y = -1
        - 1: state (State)
        - 2: audio (oneof payload: Out)
        - 3: params (map<string, string>)
        ## message Out
        - (no fields)
        """
    )
    assert wire.facts_from_markdown(md) == {
        "package": "backend",
        "service": "Backend",
        "rpcs": [{"name": "Live", "request": "In", "response": "Out", "client_streaming": True, "server_streaming": True}],
        "enums": [{"name": "Layout", "values": [["A", 0], ["B", 1]]}],
        "messages": [
            {
                "name": "In",
                "enums": [{"name": "In.State", "values": [["X", 0], ["Y", -1]]}],
                "fields": [
                    {"number": 1, "name": "state", "type": "In.State"},
                    {"number": 2, "name": "audio", "type": "oneof payload: Out"},
                    {"number": 3, "name": "params", "type": "map<string, string>"},
                ],
            },
            {"name": "Out", "enums": [], "fields": []},
        ],
    }
