"""`pants localai-proto-diff --against=<LocalAI backend.proto>`: what changed upstream.

Compiles both protos with grpcio-tools from the tests resolve and compares their wire facts
with backends/proto/wire.py (the one owner of that comparison). Lists added, removed and
changed RPCs, messages, enum values and fields; exits 1 when a change is wire-incompatible.
"""
from __future__ import annotations

import os
from pathlib import Path

from pants.backend.python.target_types import EntryPoint
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import PexRequest, VenvPex, VenvPexProcess
from pants.backend.python.util_rules.pex_requirements import PexRequirements, Resolve
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, FileContent, MergeDigests, PathGlobs
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.process import FallibleProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule
from pants.option.global_options import GlobMatchErrorBehavior
from pants.option.option_types import StrOption

from localai.errors import LocalAIError
from localai.package.proto import TESTS_INTERPRETER, TESTS_RESOLVE

OURS = "backends/proto/backend.proto"
WIRE_MODULE = "backends/proto/wire.py"
THEIRS_DIR = "__against__"


class ProtoDiffSubsystem(GoalSubsystem):
    name = "localai-proto-diff"
    help = "Compare backends/proto/backend.proto with a LocalAI backend.proto (exit 1 if wire-incompatible)."
    against = StrOption(
        default=None,
        help="Path of a LocalAI `backend/backend.proto` (e.g. from a checkout of mudler/LocalAI).",
    )


class ProtoDiffGoal(Goal):
    subsystem_cls = ProtoDiffSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


class ProtoDiffError(LocalAIError):
    pass


def read_against(path: str | None) -> tuple[str, bytes]:
    """The file named by --against, or an error that says what to pass."""
    if not path:
        raise ProtoDiffError("localai-proto-diff: no file to compare", fix="Pass --against=<path to LocalAI's backend/backend.proto>.")
    p = Path(os.path.expanduser(path))
    if not p.is_file():
        raise ProtoDiffError("no such file", file=f"--against={path}", fix="Pass the path of LocalAI's backend/backend.proto.")
    return p.name, p.read_bytes()


@goal_rule
async def proto_diff(console: Console, subsystem: ProtoDiffSubsystem) -> ProtoDiffGoal:
    name, content = read_against(subsystem.against)
    wire_module, ours, theirs = await MultiGet(
        Get(Digest, PathGlobs([WIRE_MODULE], glob_match_error_behavior=GlobMatchErrorBehavior.error,
                              description_of_origin="localai-proto-diff")),
        Get(Digest, PathGlobs([OURS], glob_match_error_behavior=GlobMatchErrorBehavior.error,
                              description_of_origin="localai-proto-diff")),
        Get(Digest, CreateDigest([FileContent(f"{THEIRS_DIR}/{name}", content)])),
    )
    tool = await Get(
        VenvPex,
        PexRequest(
            output_filename="proto-diff.pex",
            internal_only=True,
            requirements=PexRequirements(
                ["grpcio-tools", "protobuf"],
                from_superset=Resolve(TESTS_RESOLVE, False),
                description_of_origin="localai-proto-diff",
            ),
            interpreter_constraints=InterpreterConstraints([TESTS_INTERPRETER]),
            main=EntryPoint("backends.proto.wire", "main"),
            sources=wire_module,
        ),
    )
    result = await Get(
        FallibleProcessResult,
        VenvPexProcess(
            tool,
            argv=("diff", OURS, f"{THEIRS_DIR}/{name}"),
            input_digest=await Get(Digest, MergeDigests([ours, theirs])),
            description=f"Compare {OURS} with {subsystem.against}",
        ),
    )
    console.print_stdout(result.stdout.decode(), end="")
    console.print_stderr(result.stderr.decode(), end="")
    return ProtoDiffGoal(exit_code=result.exit_code)


def rules():
    return collect_rules()
