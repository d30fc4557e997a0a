"""`pants lint` runs zizmor (GitHub Actions security audit, from the `lint` resolve) on the
workflows under .github/workflows/, offline (no GitHub here or in a sandbox).

It fails on any finding of medium severity or above: unpinned actions, template injection of
event data into `run:`, credentials persisted by checkout, missing permissions... A finding
accepted on purpose is silenced where it is, with its reason: `# zizmor: ignore[<audit>]`.
"""
from __future__ import annotations

from typing import Any

from pants.backend.python.subsystems.python_tool_base import PythonToolBase
from pants.backend.python.target_types import ConsoleScript
from pants.backend.python.util_rules.pex import Pex, PexProcess, PexRequest
from pants.core.goals.lint import LintFilesRequest, LintResult
from pants.core.util_rules.partitions import Partition, Partitions
from pants.engine.fs import Digest, MergeDigests, PathGlobs
from pants.engine.internals.native_engine import FilespecMatcher, Snapshot
from pants.engine.process import FallibleProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.option.option_types import ArgsListOption, SkipOption, StrListOption
from pants.util.logging import LogLevel
from pants.util.strutil import pluralize


class Zizmor(PythonToolBase):
    options_scope = "zizmor"
    name = "zizmor"
    help = "Static analysis of GitHub Actions workflows (https://docs.zizmor.sh), run offline."

    default_version = "zizmor==1.32.0"
    default_main = ConsoleScript("zizmor")  # a Rust binary the wheel installs as a script
    default_requirements = ["zizmor"]
    register_interpreter_constraints = True
    # Pants 2.17's help text names a built-in lockfile; there is none: pants.toml installs zizmor
    # from the `lint` resolve ([zizmor].install_from_resolve), so this resource is never read.
    default_lockfile_resource = ("localai.lint", "zizmor.lock")

    include = StrListOption("--include", default=[".github/workflows/*.yml", ".github/workflows/*.yaml"], help="Workflow files to audit.")
    args = ArgsListOption(example="--persona=auditor", passthrough=False)
    skip = SkipOption("lint")


# What every run passes: no network, no progress bar in logs, fail from medium severity up.
BASE_ARGS = ("--offline", "--no-progress", "--min-severity=medium")


class ZizmorRequest(LintFilesRequest):
    tool_subsystem = Zizmor


@rule
async def partition_workflows(request: ZizmorRequest.PartitionRequest, zizmor: Zizmor) -> Partitions[str, Any]:
    if zizmor.skip:
        return Partitions()
    files = tuple(sorted(FilespecMatcher(includes=zizmor.include, excludes=[]).matches(request.files)))
    return Partitions([Partition(files, None)]) if files else Partitions()


@rule(desc="Audit GitHub workflows with zizmor", level=LogLevel.DEBUG)
async def run_zizmor(request: ZizmorRequest.Batch[str, Any], zizmor: Zizmor) -> LintResult:
    tool = await Get(Pex, PexRequest, zizmor.to_pex_request())
    workflows = await Get(Snapshot, PathGlobs(request.elements))
    result = await Get(
        FallibleProcessResult,
        PexProcess(
            tool,
            argv=(*BASE_ARGS, *zizmor.args, *workflows.files),
            input_digest=await Get(Digest, MergeDigests([tool.digest, workflows.digest])),
            description=f"Run zizmor on {pluralize(len(workflows.files), 'workflow')}.",
            level=LogLevel.DEBUG,
        ),
    )
    # Not LintResult.create: it reads a partition description, and this partition has no metadata.
    return LintResult(
        exit_code=result.exit_code,
        stdout=result.stdout.decode(),
        stderr=result.stderr.decode(),
        linter_name=ZizmorRequest.tool_name,
    )


def rules():
    return (*collect_rules(), *ZizmorRequest.rules())
