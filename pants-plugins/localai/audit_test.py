from __future__ import annotations

import json

from pants.core.goals.lint import LintResult
from pants.engine.addresses import Address
from pants.testutil.rule_runner import QueryRule

from localai.audit import AuditRequest, locked_projects, project_of_wheel
from localai.package import BackendVariantFieldSet
from localai.testutil import backend_files, make_rule_runner, resolve_options


def lockfile(*projects: str) -> str:
    reqs = [{"project_name": p, "version": "1.0", "artifacts": []} for p in projects]
    return "// generated\n" + json.dumps({"locked_resolves": [{"locked_requirements": reqs}]})


def test_locked_projects_reads_past_the_header() -> None:
    assert locked_projects(lockfile("torch", "numpy").encode()) == ("numpy", "torch")


def test_project_of_wheel_normalises_names() -> None:
    assert project_of_wheel("nvidia_cublas-13.0.0-py3-none-manylinux_2_27_x86_64.whl") == "nvidia-cublas"


def _audit(files: dict[str, str], name: str, accel: str) -> LintResult:
    rule_runner = make_rule_runner(QueryRule(LintResult, [AuditRequest.Batch]))
    rule_runner.write_files(files)
    rule_runner.set_options(resolve_options(name, [accel]))
    tgt = rule_runner.get_target(Address(f"backends/{name}", target_name=accel))
    return rule_runner.request(
        LintResult, [AuditRequest.Batch("localai-audit", (BackendVariantFieldSet.create(tgt),), None)]
    )


def test_cpu_lockfile_with_nvidia_packages_fails_naming_package_and_target() -> None:
    files = backend_files("demo", {"rocm": ""})
    files["lockfiles/demo-rocm.lock"] = lockfile("torch", "nvidia-cudnn-cu13", "triton")
    result = _audit(files, "demo", "rocm")
    assert result.exit_code == 1
    assert "backends/demo:rocm: lockfiles/demo-rocm.lock locks 'nvidia-cudnn-cu13'" in result.stdout
    assert "locks 'triton'" in result.stdout


def test_cuda_lockfile_may_hold_nvidia_packages() -> None:
    files = backend_files("demo", {"cuda13": ""})
    files["lockfiles/demo-cuda13.lock"] = lockfile("torch", "nvidia-cudnn-cu13", "triton")
    result = _audit(files, "demo", "cuda13")
    assert result.exit_code == 0, result.stdout
    assert "no forbidden package" in result.stdout


def test_variant_without_lockfile_is_reported_not_failed() -> None:
    result = _audit(backend_files("demo", {"intel": ""}), "demo", "intel")
    assert result.exit_code == 0
    assert "no lockfile (lockfiles/demo-intel.lock)" in result.stdout
