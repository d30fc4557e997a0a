from __future__ import annotations

import json
import os
import subprocess

import pytest
from pants.backend.python.target_types import PythonTestsGeneratorTarget, PythonTestTarget
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.target import COMMON_TARGET_FIELDS, BoolField, Dependencies, MultipleSourcesField, Target
from pants.testutil.rule_runner import QueryRule

from localai.goals.ci_matrix import CIJobs, CIJobsRequest, CIMatrixGoal
from localai.testutil import backend_files, fake_lockfile, make_rule_runner


class _EngineSources(MultipleSourcesField):
    default = ("src/*",)


class _Coverage(BoolField):
    alias = "sanitizer_coverage"
    default = False


class FakeEngine(Target):
    """Stands in for the engines' target type (another engineer's work in progress)."""

    alias = "test_engine"
    core_fields = (*COMMON_TARGET_FIELDS, Dependencies, _EngineSources, _Coverage)


RESOLVES = {"bark": ["cpu", "cuda12"], "kokoro": ["cpu", "metal"]}


def _options(extra: dict[str, list[str]] | None = None) -> list[str]:
    every = {**RESOLVES, **(extra or {})}
    resolves = {f"{n}-{a}": f"lockfiles/{n}-{a}.lock" for n, accels in every.items() for a in accels}
    pip = {f"{n}-{a}": f"3rdparty/accelerators/{a}.txt" for n, accels in every.items() for a in accels}
    return [
        "--python-enable-resolves",
        f"--python-resolves={resolves!r}",
        f"--python-resolves-to-constraints-file={pip!r}",
        # The stand-in test targets' dependencies are explicit: no import parsing (it needs the pex tool).
        "--python-infer-imports=false",
        "--python-infer-conftests=false",
        "--python-infer-init-files=never",
    ]


def _runner():
    rule_runner = make_rule_runner(
        QueryRule(CIJobs, [CIJobsRequest]), extra_target_types=[FakeEngine, PythonTestsGeneratorTarget, PythonTestTarget]
    )
    files = {
        **{f"lockfiles/{n}-{a}.lock": fake_lockfile({}) for n, accels in RESOLVES.items() for a in accels},
        "backends/common/server.py": "",
        "engines/minilm/BUILD": 'test_engine(name="avx2")\ntest_engine(name="fuzz", sanitizer_coverage=True)\n',
        "tests/BUILD": 'python_tests(name="bark", sources=["test_bark.py"], runtime_package_dependencies=["backends/bark:cpu"])\n',
        "tests/test_bark.py": "",
        "engines/minilm/src/minilm.cpp": "",
        "docs/ci.md": "",
        "pants.toml": "",
        **backend_files("bark", {"cpu": "", "cuda12": ""}),
        # kokoro serves the engine: its variants depend on the engine target.
        **backend_files("kokoro", {"cpu": "", "metal": ""}, engines=["engines/minilm:avx2"]),
        "backends/bark/backend.py": "",
        "backends/kokoro/backend.py": "",
    }
    rule_runner.write_files(files)
    rule_runner.set_options(_options())
    return rule_runner


def _request(rule_runner, *changed, runners=()) -> CIJobs:
    return rule_runner.request(
        CIJobs, [CIJobsRequest(tuple(changed), tuple(runners), "ubuntu-latest", ("test_engine",), ("pants.toml",))]
    )


def _jobs(rule_runner, *changed, runners=()) -> dict[str, str]:
    return {j.target: j.runner for j in _request(rule_runner, *changed, runners=runners).jobs}


@pytest.fixture(scope="module")
def rule_runner():
    """One rule runner for the tests that only ask questions of the same files (building a
    rule runner costs seconds; every test below that changes a file makes its own)."""
    return _runner()


ALL_VARIANTS = {"backends/bark:cpu", "backends/bark:cuda12", "backends/kokoro:cpu", "backends/kokoro:metal"}


def test_common_change_rebuilds_every_backend_variant(rule_runner) -> None:
    assert set(_jobs(rule_runner, "backends/common/server.py")) == ALL_VARIANTS


def test_accelerator_requirement_file_rebuilds_only_that_variant(rule_runner) -> None:
    assert _jobs(rule_runner, "backends/bark/requirements-cpu.txt") == {"backends/bark:cpu": "ubuntu-latest"}
    assert _jobs(rule_runner, "lockfiles/kokoro-metal.lock") == {"backends/kokoro:metal": "macos-14"}


def test_base_requirement_file_and_build_file_rebuild_every_variant_of_the_backend(rule_runner) -> None:
    assert set(_jobs(rule_runner, "backends/bark/requirements.txt")) == {"backends/bark:cpu", "backends/bark:cuda12"}
    assert set(_jobs(rule_runner, "backends/bark/BUILD")) == {"backends/bark:cpu", "backends/bark:cuda12"}
    assert set(_jobs(rule_runner, "backends/bark/backend.py")) == {"backends/bark:cpu", "backends/bark:cuda12"}


def test_engine_change_rebuilds_the_engine_and_the_backend_serving_it(rule_runner) -> None:
    assert _jobs(rule_runner, "engines/minilm/src/minilm.cpp") == {
        "engines/minilm:avx2": "ubuntu-latest",
        "backends/kokoro:cpu": "ubuntu-latest",
        "backends/kokoro:metal": "macos-14",
    }


def test_unrelated_and_global_files(rule_runner) -> None:
    assert _jobs(rule_runner, "docs/ci.md") == {}
    assert set(_jobs(rule_runner, "pants.toml")) == ALL_VARIANTS | {"engines/minilm:avx2"}


def test_the_plugin_resolve_rebuilds_every_job_by_default(rule_runner) -> None:
    # It runs every image's layer step (oci/image.py), and no target of a variant owns it.
    result = rule_runner.run_goal_rule(
        CIMatrixGoal,
        global_args=_options(),
        args=["--files=['lockfiles/pants-plugins.lock']", "--job-target-types=['test_engine']"],
        env_inherit={"PATH"},
    )
    assert result.exit_code == 0, result.stderr
    assert {j["target"] for j in json.loads(result.stdout)["include"]} == ALL_VARIANTS | {"engines/minilm:avx2"}


def test_the_stubs_tool_rebuilds_the_imported_folders_only() -> None:
    # An imported folder's stubs come from the grpc-stubs resolve, which no target of its closure owns.
    rule_runner = _runner()
    rule_runner.write_files(
        {
            "backends/localai/common/BUILD": "localai_common()\n",
            "backends/localai/demo/BUILD": 'localai_import(accelerators=["cpu"])\n',
            "backends/localai/demo/backend.py": "",
            "backends/localai/demo/requirements-cpu.txt": "",
            "lockfiles/localai-demo-cpu.lock": fake_lockfile({}),
        }
    )
    rule_runner.set_options(_options({"localai-demo": ["cpu"]}))
    for changed in ("lockfiles/grpc-stubs.lock", "3rdparty/grpc-stubs/BUILD"):
        assert _jobs(rule_runner, changed) == {"backends/localai/demo:cpu": "ubuntu-latest"}, changed


def test_no_job_for_a_variant_without_lockfile_or_a_test_support_build() -> None:
    rule_runner = _runner()
    os.remove(f"{rule_runner.build_root}/lockfiles/bark-cuda12.lock")
    assert set(_jobs(rule_runner, "pants.toml")) == (ALL_VARIANTS - {"backends/bark:cuda12"}) | {"engines/minilm:avx2"}
    assert "engines/minilm:fuzz" not in _jobs(rule_runner, "engines/minilm/src/minilm.cpp")


def test_each_job_names_the_tests_that_depend_on_it(rule_runner) -> None:
    jobs = {j.target: j.tests for j in _request(rule_runner, "pants.toml").jobs}
    assert jobs["backends/bark:cpu"] == ("tests/test_bark.py:bark",)
    assert jobs["backends/kokoro:cpu"] == () and jobs["engines/minilm:avx2"] == ()


def test_runner_labels_default_and_override(rule_runner) -> None:
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
            {"runner": "ubuntu-latest", "target": "backends/bark:cpu", "tests": "tests/test_bark.py:bark"},
            {"runner": "ubuntu-latest", "target": "backends/kokoro:cpu", "tests": ""},
            {"runner": "macos-14", "target": "backends/kokoro:metal", "tests": ""},
            {"runner": "ubuntu-latest", "target": "engines/minilm:avx2", "tests": ""},
        ]
    }


def test_ref_that_does_not_exist_is_a_clear_error() -> None:
    rule_runner, _ = _git_repo()
    with pytest.raises(ExecutionError) as e:
        rule_runner.run_goal_rule(CIMatrixGoal, global_args=_options(), args=["--since=no-such-ref"], env_inherit={"PATH"})
    msg = str(e.value)
    assert "--since=no-such-ref: git cannot compare with 'no-such-ref'" in msg
    assert "fetch-depth: 0" in msg
