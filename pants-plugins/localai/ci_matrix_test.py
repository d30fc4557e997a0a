from __future__ import annotations

import json
import subprocess

import pytest

from pants.engine.internals.scheduler import ExecutionError
from pants.engine.target import COMMON_TARGET_FIELDS, Dependencies, MultipleSourcesField, Target
from pants.testutil.rule_runner import QueryRule

from localai.ci_matrix import CIJobs, CIJobsRequest, CIMatrixGoal
from localai.testutil import backend_files, make_rule_runner, resolve_options


class _EngineSources(MultipleSourcesField):
    default = ("src/*",)


class FakeEngine(Target):
    """Stands in for the engines' target type (another engineer's work in progress)."""

    alias = "test_engine"
    core_fields = (*COMMON_TARGET_FIELDS, Dependencies, _EngineSources)


RESOLVES = {"bark": ["cpu", "cuda12"], "kokoro": ["cpu", "metal"]}


def _options() -> list[str]:
    resolves, pip = {}, {}
    for name, accels in RESOLVES.items():
        r, p = resolve_options(name, accels)
        resolves.update(eval(r.split("=", 1)[1]))
        pip.update(eval(p.split("=", 1)[1]))
    return [f"--python-resolves={resolves!r}", f"--python-resolves-to-constraints-file={pip!r}"]


def _runner():
    rule_runner = make_rule_runner(QueryRule(CIJobs, [CIJobsRequest]), extra_target_types=[FakeEngine])
    files = {
        "backends/common/BUILD": 'localai_sources(name="common")\n',
        "backends/common/server.py": "",
        "engines/minilm/BUILD": 'test_engine(name="avx2")\n',
        "engines/minilm/src/minilm.cpp": "",
        "docs/ci.md": "",
        "pants.toml": "",
        **backend_files("bark", {"cpu": "", "cuda12": ""}, src_dependencies=["backends/common"]),
        # kokoro serves the engine: its sources depend on the engine target.
        **backend_files("kokoro", {"cpu": "", "metal": ""}, src_dependencies=["backends/common", "engines/minilm:avx2"]),
        "backends/bark/backend.py": "",
        "backends/kokoro/backend.py": "",
    }
    rule_runner.write_files(files)
    rule_runner.set_options(_options())
    return rule_runner


def _jobs(rule_runner, *changed, runners=()) -> dict[str, str]:
    jobs = rule_runner.request(
        CIJobs, [CIJobsRequest(tuple(changed), tuple(runners), "ubuntu-latest", ("test_engine",), ("pants.toml",))]
    )
    return {j.target: j.runner for j in jobs.jobs}


ALL_VARIANTS = {"backends/bark:cpu", "backends/bark:cuda12", "backends/kokoro:cpu", "backends/kokoro:metal"}


def test_common_change_rebuilds_every_backend_variant() -> None:
    assert set(_jobs(_runner(), "backends/common/server.py")) == ALL_VARIANTS


def test_accelerator_requirement_file_rebuilds_only_that_variant() -> None:
    rule_runner = _runner()
    assert _jobs(rule_runner, "backends/bark/requirements-cpu.txt") == {"backends/bark:cpu": "ubuntu-latest"}
    assert _jobs(rule_runner, "lockfiles/kokoro-metal.lock") == {"backends/kokoro:metal": "macos-14"}


def test_base_requirement_file_and_build_file_rebuild_every_variant_of_the_backend() -> None:
    rule_runner = _runner()
    assert set(_jobs(rule_runner, "backends/bark/requirements.txt")) == {"backends/bark:cpu", "backends/bark:cuda12"}
    assert set(_jobs(rule_runner, "backends/bark/BUILD")) == {"backends/bark:cpu", "backends/bark:cuda12"}
    assert set(_jobs(rule_runner, "backends/bark/backend.py")) == {"backends/bark:cpu", "backends/bark:cuda12"}


def test_engine_change_rebuilds_the_engine_and_the_backend_serving_it() -> None:
    assert _jobs(_runner(), "engines/minilm/src/minilm.cpp") == {
        "engines/minilm:avx2": "ubuntu-latest",
        "backends/kokoro:cpu": "ubuntu-latest",
        "backends/kokoro:metal": "macos-14",
    }


def test_unrelated_and_global_files() -> None:
    rule_runner = _runner()
    assert _jobs(rule_runner, "docs/ci.md") == {}
    assert set(_jobs(rule_runner, "pants.toml")) == ALL_VARIANTS | {"engines/minilm:avx2"}


def test_runner_labels_default_and_override() -> None:
    rule_runner = _runner()
    assert _jobs(rule_runner, "backends/bark/requirements-cuda12.txt") == {"backends/bark:cuda12": "gpu-nvidia"}
    assert _jobs(rule_runner, "backends/bark/requirements-cuda12.txt", runners=[("cuda12", "gpu-l4")]) == {
        "backends/bark:cuda12": "gpu-l4"
    }


def _git(root: str, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=root, check=True, capture_output=True
    )


def _git_repo():
    rule_runner = _runner()
    root = rule_runner.build_root
    rule_runner.write_files({".gitignore": ".pants.d/\ndist/\n.pids/\n"})
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "base")
    return rule_runner, root


def test_goal_against_a_real_git_repository() -> None:
    rule_runner, root = _git_repo()
    rule_runner.write_files({"backends/bark/requirements-cpu.txt": "torch==2.13.0+cpu\n"})
    _git(root, "commit", "-q", "-am", "bark cpu pin")
    rule_runner.write_files({"engines/minilm/src/new.cpp": ""})  # untracked: counted too
    result = rule_runner.run_goal_rule(
        CIMatrixGoal,
        global_args=_options(),
        args=["--since=HEAD~1", "--job-target-types=['test_engine']"],
        env_inherit={"PATH"},
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "include": [
            {"runner": "ubuntu-latest", "target": "backends/bark:cpu"},
            {"runner": "ubuntu-latest", "target": "backends/kokoro:cpu"},
            {"runner": "macos-14", "target": "backends/kokoro:metal"},
            {"runner": "ubuntu-latest", "target": "engines/minilm:avx2"},
        ]
    }


def test_ref_that_does_not_exist_is_a_clear_error() -> None:
    rule_runner, _ = _git_repo()
    with pytest.raises(ExecutionError) as e:
        rule_runner.run_goal_rule(CIMatrixGoal, global_args=_options(), args=["--since=no-such-ref"], env_inherit={"PATH"})
    msg = str(e.value)
    assert "--since=no-such-ref: git cannot compare with 'no-such-ref'" in msg
    assert "fetch-depth: 0" in msg
