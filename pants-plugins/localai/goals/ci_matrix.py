"""`pants localai-ci-matrix --since=<ref>`: the CI jobs of what changed, as a GitHub Actions matrix.

Prints `{"include": [{"target": "backends/bark:cpu", "runner": "ubuntu-latest"}, ...]}`.

A job is a backend variant (localai_backend_variant) or an engine (--job-target-types, default
native_engine). A job runs when a changed file is one of its inputs:
  - the sources and BUILD files of every target in its transitive dependencies (so a change in
    backends/common/ rebuilds every variant, and a change in engines/<x>/ rebuilds the engine
    and every variant whose backend depends on it: dependents included);
    A variant depends on its requirements target, whose python_requirement targets depend on the
    requirement files they were read from and on the resolve's lockfile: so backends/<x>/requirements.txt
    selects every variant of x, requirements-<accel>.txt and the lockfile only backends/<x>:<accel>;
  - for a variant, the files its rules read that no target owns: the accelerator matrix and the
    accelerator's pip options file; for an imported LocalAI folder also the stubs tool
    (3rdparty/grpc-stubs/BUILD, lockfiles/grpc-stubs.lock);
  - files matching --global-globs (pants.toml, the plugin, the bootstrap) rebuild every job.

Only variants with a committed lockfile are jobs (the others cannot be built anywhere, and
docs/status.md says why), and never test-support builds (a job target with one of
--test-support-fields set, e.g. the coverage-instrumented `engines/minilm:fuzz` and the
`engines/minilm:<variant>-cpptests` build that carries the C++ test binary). Each job
carries `tests`: the test targets that depend on it (runtime_package_dependencies included),
which the workflow runs after packaging.
"""
from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass

from pants.base.build_root import BuildRoot
from pants.core.util_rules.system_binaries import GitBinaryException
from pants.engine.console import Console
from pants.engine.goal import Goal, GoalSubsystem, Outputting
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule, rule
from pants.engine.target import (
    AllTargets,
    SourcesField,
    SourcesPaths,
    SourcesPathsRequest,
    Target,
    TransitiveTargets,
    TransitiveTargetsRequest,
)
from pants.option.option_types import DictOption, StrListOption, StrOption
from pants.util.logging import LogLevel
from pants.util.strutil import help_text
from pants.vcs.git import GitWorktreeRequest, MaybeGitWorktree

from localai.errors import LocalAIError
from localai.model.accelerators import MATRIX_PATH
from localai.model.variant import AllBackendVariants, BackendVariant
from localai.package.proto import STUBS_TOOL_FILES

# Runner label per accelerator. Building needs no GPU, but the variant's tests do: GPU variants go
# to self-hosted runners carrying these labels. Override with --localai-ci-matrix-runners.
DEFAULT_RUNNERS = {
    "cpu": "ubuntu-latest",
    "cuda12": "gpu-nvidia",
    "cuda13": "gpu-nvidia",
    "rocm": "gpu-amd",
    "intel": "gpu-intel",
    "metal": "macos-14",
}


class CIMatrixError(LocalAIError):
    pass


class CIMatrixSubsystem(Outputting, GoalSubsystem):
    name = "localai-ci-matrix"
    help = help_text(
        """
        Print, as a GitHub Actions matrix (`{"include": [{"target": ..., "runner": ...}]}`), the
        backend variants and engines whose inputs changed since --since (committed since the
        merge base, uncommitted and untracked files), dependents included.
        """
    )

    since = StrOption(default=None, help="The git ref to compare with, e.g. origin/main.")
    files = StrListOption(
        default=[], help="Changed files given explicitly (repo-relative) instead of asking git with --since."
    )
    runners = DictOption[str](
        default={},
        help=f"Runner label per accelerator, over the defaults {json.dumps(DEFAULT_RUNNERS)}.",
    )
    engine_runner = StrOption(default="ubuntu-latest", help="Runner label of jobs that are not backend variants.")
    job_target_types = StrListOption(
        default=["native_engine"], help="Target types (aliases) that are CI jobs besides localai_backend_variant."
    )
    test_support_fields = StrListOption(
        default=["sanitizer_coverage", "include_test_binary"],
        help="Boolean fields (aliases) that mark a job target as a test-support build, never a job of its own.",
    )
    test_target_types = StrListOption(
        default=["python_test"], help="Target types (aliases) whose targets are the tests a job runs."
    )
    global_globs = StrListOption(
        # lockfiles/pants-plugins.lock: the plugin's resolve, which also runs every image's layer step.
        default=["pants.toml", "pants", "pants-plugins/**", "3rdparty/pants/**", "lockfiles/pants-plugins.lock",
                 ".github/workflows/backends.yml"],
        help="A changed file matching one of these rebuilds every job.",
    )


class CIMatrixGoal(Goal):
    subsystem_cls = CIMatrixSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


@dataclass(frozen=True)
class CIJobsRequest:
    changed_files: tuple[str, ...]
    runners: tuple[tuple[str, str], ...]
    engine_runner: str
    job_target_types: tuple[str, ...]
    global_globs: tuple[str, ...]
    test_support_fields: tuple[str, ...] = ("sanitizer_coverage", "include_test_binary")
    test_target_types: tuple[str, ...] = ("python_test",)


@dataclass(frozen=True)
class CIJob:
    target: str
    runner: str
    tests: tuple[str, ...] = ()


@dataclass(frozen=True)
class CIJobs:
    jobs: tuple[CIJob, ...]

    def to_json(self) -> str:
        return json.dumps(
            {"include": [{"target": j.target, "runner": j.runner, "tests": " ".join(j.tests)} for j in self.jobs]},
            sort_keys=True,
        )


def config_files(variant: BackendVariant) -> set[str]:
    """Files a variant's rules read that no target owns: the accelerator matrix and its pip options,
    and for an imported LocalAI folder the stubs tool (the grpc-stubs resolve's BUILD and lockfile).
    (Requirement files and the lockfile are sources of targets in its closure.)"""
    stubs = set(STUBS_TOOL_FILES) if variant.layout.imported else set()
    return {MATRIX_PATH, variant.variant.accelerator.pip_options, variant.variant.pip_options, *stubs}


def is_build_file_of(path: str, spec_path: str) -> bool:
    head, base = os.path.split(path)
    return head == spec_path and (base == "BUILD" or base.startswith("BUILD."))


def is_test_support(tgt: Target, fields: tuple[str, ...]) -> bool:
    return any(f.alias in fields and f.value is True for f in tgt.field_values.values())


@rule(desc="Find the CI jobs of changed files", level=LogLevel.DEBUG)
async def ci_jobs(request: CIJobsRequest, all_targets: AllTargets, variants: AllBackendVariants) -> CIJobs:
    # Only variants with a lockfile: the others cannot be built anywhere (docs/status.md says why).
    locked = {v.address: v for v in variants.locked()}
    roots = sorted(
        (
            t
            for t in all_targets
            if (t.address in locked or t.alias in request.job_target_types)
            and not is_test_support(t, request.test_support_fields)
        ),
        key=lambda t: t.address.spec,
    )
    test_targets = sorted((t for t in all_targets if t.alias in request.test_target_types), key=lambda t: t.address.spec)
    test_closures = await MultiGet(
        Get(TransitiveTargets, TransitiveTargetsRequest([t.address], include_special_cased_deps=True)) for t in test_targets
    )
    tests_of: dict = {}
    for test, closure in zip(test_targets, test_closures):
        for dep in closure.dependencies:
            tests_of.setdefault(dep.address, []).append(test.address.spec)
    changed = set(request.changed_files)
    rebuild_all = any(fnmatch.fnmatch(f, g) for f in changed for g in request.global_globs)
    closures = await MultiGet(Get(TransitiveTargets, TransitiveTargetsRequest([t.address])) for t in roots)
    every = {t for c in closures for t in c.closure if t.has_field(SourcesField)}
    every_sorted = sorted(every, key=lambda t: t.address.spec)
    paths = await MultiGet(Get(SourcesPaths, SourcesPathsRequest(t[SourcesField])) for t in every_sorted)
    sources = {t.address: set(p.files) for t, p in zip(every_sorted, paths)}

    runners = {**DEFAULT_RUNNERS, **dict(request.runners)}
    jobs = []
    for root, closure in zip(roots, closures):
        inputs: set[str] = set()
        spec_paths = set()
        for t in closure.closure:
            inputs |= sources.get(t.address, set())
            spec_paths.add(t.address.spec_path)
        variant = locked.get(root.address)
        if variant:
            inputs |= config_files(variant)
        hit = rebuild_all or bool(inputs & changed) or any(
            is_build_file_of(f, sp) for f in changed for sp in spec_paths
        )
        if not hit:
            continue
        if variant:
            accel = variant.variant.accelerator.name
            if accel not in runners:
                raise CIMatrixError(
                    f"{root.address}: no CI runner for accelerator '{accel}'. Add it: "
                    f"--localai-ci-matrix-runners=\"{{'{accel}': '<runner label>'}}\" (or [localai-ci-matrix].runners in pants.toml)"
                )
            runner = runners[accel]
        else:
            runner = request.engine_runner
        jobs.append(CIJob(root.address.spec, runner, tuple(sorted(tests_of.get(root.address, ())))))
    return CIJobs(tuple(jobs))


def changed_files_since(maybe_worktree: MaybeGitWorktree, since: str) -> tuple[str, ...]:
    worktree = maybe_worktree.git_worktree
    if worktree is None:
        raise CIMatrixError(f"--since={since}: the build root is not a git worktree (or git is not installed)")
    try:
        files = worktree.changed_files(from_commit=since, include_untracked=True)
    except GitBinaryException as e:
        raise CIMatrixError(
            f"--since={since}: git cannot compare with '{since}': it is not a commit in this clone "
            f"({str(e).strip().splitlines()[-1] if str(e).strip() else e!r}). Fix: fetch it "
            f"(`git fetch origin <branch>`; in GitHub Actions checkout with fetch-depth: 0) or pass an existing ref."
        ) from e
    return tuple(sorted(files))


@goal_rule
async def localai_ci_matrix(console: Console, subsystem: CIMatrixSubsystem, build_root: BuildRoot) -> CIMatrixGoal:
    if subsystem.files:
        changed = tuple(sorted(subsystem.files))
    elif subsystem.since:
        worktree = await Get(MaybeGitWorktree, GitWorktreeRequest(subdir=build_root.path))
        changed = changed_files_since(worktree, subsystem.since)
    else:
        raise CIMatrixError("localai-ci-matrix needs --since=<git ref> (e.g. origin/main) or --files=[...]")
    jobs = await Get(
        CIJobs,
        CIJobsRequest(
            changed,
            tuple(sorted(subsystem.runners.items())),
            subsystem.engine_runner,
            tuple(subsystem.job_target_types),
            tuple(subsystem.global_globs),
            tuple(subsystem.test_support_fields),
            tuple(subsystem.test_target_types),
        ),
    )
    with subsystem.output(console) as write:
        write(jobs.to_json() + "\n")
    console.print_stderr(f"{len(changed)} changed files -> {len(jobs.jobs)} jobs")
    return CIMatrixGoal(exit_code=0)


def rules():
    return collect_rules()
