"""`./pants localai-prelock --resolve=<resolve>`: resolve a prelocked variant with uv, write its pins.

uv (PyPI's `uv`, pinned in the `uv` resolve: 3rdparty/uv/BUILD, lockfiles/uv.lock) runs as a
Pants process, never from the host: `uv pip compile` of the resolve's requirements (as
`generate-lockfiles` reads them, goals/prelock_inputs.py) with the variant's own pip options
(the accelerator's find-links or index, its extra indexes) and `[python-repos]`'s indexes, for
linux x86_64 and the resolve's CPython. Its `name==version` lines become the pins block of the
variant's pip options file (rendered by goals/resolves.py, the file's one writer); the goal then
says to run `generate-lockfiles`, which hands the file to pex as `--constraints`.

Why pins and not uv's lock: Pants 2.17 locks with pex (universal, linux + mac) and keeps its
lockfile's metadata and staleness check; uv only narrows pip's search to one candidate per
package. Why `--index-strategy unsafe-best-match`: pip takes the best version over all indexes
and find-links together; uv's default (first index that has the project) could pin a version
pip would not choose, or one only found on a lower-priority index. Direct references
(`name @ url`) are left out: pip refuses a constraint on them, and pex locks them as given.
"""
from __future__ import annotations

import dataclasses

from pants.backend.python.subsystems.python_tool_base import PythonToolBase
from pants.backend.python.target_types import ConsoleScript
from pants.backend.python.util_rules.pex import Pex, PexProcess, PexRequest
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent, MergeDigests, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope, ProcessResult
from pants.engine.rules import Get, collect_rules, goal_rule, rule
from pants.option.global_options import GlobalOptions, ca_certs_path_to_file_content
from pants.option.option_types import StrListOption
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.goals.prelock_inputs import PrelockInputs, PrelockInputsRequest
from localai.goals.resolves import (
    DeclaredResolves,
    ResolveEntry,
    accelerator_options_of,
    option_lines,
    render_variant_pip_options,
)
from localai.model.prelock import PinBlock, regenerate


class PrelockError(LocalAIError):
    pass


class Uv(PythonToolBase):
    options_scope = "uv"
    name = "uv"
    help = "The resolver that pins a prelocked variant's packages before pex locks it (https://docs.astral.sh/uv)."

    default_version = "uv==0.13.8"
    default_main = ConsoleScript("uv")  # a Rust binary the wheel installs as a script
    default_requirements = ["uv"]
    register_interpreter_constraints = True
    # Pants 2.17's help text names a built-in lockfile; there is none: pants.toml installs uv
    # from the `uv` resolve ([uv].install_from_resolve), so this resource is never read.
    default_lockfile_resource = ("localai.goals", "uv.lock")


IN_FILE = "prelock.in"
OUT_FILE = "prelock.txt"
CACHE = ".cache/uv"  # a named cache: later runs reuse uv's downloads and built metadata


@dataclasses.dataclass(frozen=True)
class PrelockRequest:
    entry: ResolveEntry


def uv_argv(inputs: PrelockInputs, python: str | None) -> tuple[str, ...]:
    indexes = inputs.indexes
    return (
        "pip",
        "compile",
        IN_FILE,
        f"--output-file={OUT_FILE}",
        "--no-config",  # no host uv.toml / pyproject settings
        "--no-header",
        "--no-annotate",
        "--quiet",
        f"--python-version={inputs.python}",
        f"--python-platform={inputs.platform}",
        "--index-strategy=unsafe-best-match",
        *((f"--default-index={indexes[0]}", *(f"--index={i}" for i in indexes[1:])) if indexes else ("--no-index",)),
        *(f"--find-links={f}" for f in inputs.find_links),
        # The interpreter that builds an sdist's metadata when a project has no wheel.
        *((f"--python={python}",) if python else ()),
    )


def pins_of(output: str) -> tuple[str, ...]:
    """uv's `name==version` lines; direct references and options are not pins."""
    lines = (line.split("#", 1)[0].strip() for line in output.splitlines())
    return tuple(line for line in lines if line and "==" in line and " @ " not in line and not line.startswith("-"))


@rule(desc="Resolve a prelocked variant with uv", level=LogLevel.DEBUG)
async def prelock(request: PrelockRequest, uv: Uv, global_options: GlobalOptions) -> PinBlock:
    entry = request.entry
    accelerator_options = (await accelerator_options_of((entry,)))[entry.accelerator_pip_options]
    inputs = await Get(PrelockInputs, PrelockInputsRequest(entry.resolve, option_lines(entry, accelerator_options)))
    tool = await Get(Pex, PexRequest, uv.to_pex_request())
    files = [FileContent(IN_FILE, "".join(line + "\n" for line in (*inputs.pip_options, *inputs.requirements)).encode())]
    env = {"UV_CACHE_DIR": CACHE, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    if global_options.ca_certs_path:
        # Behind a TLS-intercepting proxy uv needs the CA bundle ./pants found, as pex gets it.
        certs = ca_certs_path_to_file_content(global_options.ca_certs_path)
        files.append(certs)
        env["SSL_CERT_FILE"] = certs.path
    process = await Get(
        Process,
        PexProcess(
            tool,
            argv=uv_argv(inputs, tool.python.path if tool.python else None),
            input_digest=await Get(Digest, MergeDigests([tool.digest, await Get(Digest, CreateDigest(files))])),
            extra_env=env,
            output_files=(OUT_FILE,),
            description=f"Resolve {entry.resolve} with uv ({len(inputs.requirements)} requirements)",
            level=LogLevel.INFO,
            # Like generate-lockfiles: always today's index, never a cached resolve.
            cache_scope=ProcessCacheScope.PER_SESSION,
        ),
    )
    result = await Get(FallibleProcessResult, Process, dataclasses.replace(process, append_only_caches={**process.append_only_caches, "uv": CACHE}))
    if result.exit_code != 0:
        raise PrelockError(
            f"{entry.directory}/BUILD ({entry.resolve}): uv could not resolve its requirements for "
            f"{inputs.platform}, CPython {inputs.python} (the pins `generate-lockfiles` would lock with):\n"
            f"{result.stderr.decode().strip()}\n"
            f"Fix: change the requirement files (or the folder's [localai.overrides.<folder>] in 3rdparty/accelerators.toml), "
            f"then run `{regenerate(entry.resolve)}` again."
        )
    output = await Get(DigestContents, Digest, result.output_digest)
    # The version the resolve installed (3rdparty/uv/BUILD), not [uv].version's default.
    version = await Get(
        ProcessResult, PexProcess(tool, argv=("--version",), description="uv --version", level=LogLevel.DEBUG)
    )
    return PinBlock.create(
        entry.resolve,
        " ".join(version.stdout.decode().split()[:2]),  # "uv 0.13.8"
        f"{inputs.platform}, CPython {inputs.python}",
        inputs.digest,
        pins_of(output[0].content.decode()),
    )


class PrelockSubsystem(GoalSubsystem):
    name = "localai-prelock"
    help = (
        "Resolve prelocked variants with uv and write the exact pins into their own pip options files "
        "(3rdparty/accelerators/variants/<resolve>.txt); then `generate-lockfiles` locks them without backtracking."
    )

    resolve = StrListOption(
        default=[],
        help="The resolves to prelock (each a variant with prelock set); none: every prelocked variant.",
    )


class PrelockGoal(Goal):
    subsystem_cls = PrelockSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


@goal_rule
async def write_prelock(console: Console, workspace: Workspace, subsystem: PrelockSubsystem, declared: DeclaredResolves) -> PrelockGoal:
    by_resolve = {e.resolve: e for e in declared.entries}
    asked = subsystem.resolve or [e.resolve for e in declared.entries if e.prelock]
    problems = []
    for resolve in asked:
        if resolve not in by_resolve:
            problems.append(f"{resolve}: no backend variant declares this resolve. Fix: name one of `./pants localai-resolves`'s.")
        elif not by_resolve[resolve].prelock:
            e = by_resolve[resolve]
            problems.append(
                f"{resolve}: {e.directory}/BUILD does not set prelock for it. Fix: for an imported folder, add its accelerator to "
                f"`[localai.overrides.<folder>] prelock` in 3rdparty/accelerators.toml and re-run `./pants localai-import`; "
                f"else `prelock=True` on the variant."
            )
    if problems or not asked:
        for line in problems or ["No variant sets prelock: nothing to do."]:
            console.print_stderr(line)
        return PrelockGoal(exit_code=1 if problems else 0)
    entries = [by_resolve[r] for r in asked]
    options = await accelerator_options_of(entries)
    writes = []
    for e in entries:
        # One at a time: uv uses both cores, and its cache is shared.
        pins = await Get(PinBlock, PrelockRequest(e))
        writes.append(FileContent(e.pip_options, render_variant_pip_options(e, options[e.accelerator_pip_options], pins).encode()))
        console.print_stdout(f"{e.resolve}: {len(pins.pins)} pins ({pins.tool}) -> {e.pip_options}")
    workspace.write_digest(await Get(Digest, CreateDigest(writes)))
    resolves = " ".join(f"--resolve={e.resolve}" for e in entries)
    console.print_stdout(f"Now lock: ./pants localai-lock {resolves}")
    return PrelockGoal(exit_code=0)


def rules():
    return collect_rules()

