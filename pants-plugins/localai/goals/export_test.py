from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml  # pants: no-infer-dep (PyYAML comes with pantsbuild.pants)
from pants.core.goals.package import BuiltPackage
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from localai.goals.export import ExportFieldSet, ExportGoal, ExportLockfileError, exportable_requirements, requirements_txt
from localai.model.accelerators import AcceleratorMatrix
from localai.model.lockfile import Lockfile, LockfileFormatError
from localai.testutil import backend_files, fake_lockfile, make_rule_runner, repo_file, resolve_options

H = {c: c * 64 for c in "abcdef"}
LOCK = fake_lockfile(
    {
        "torch": ("2.13.0+cpu", [("file://${WHEELHOUSE}/cpu/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", H["a"])]),
        "numpy": (
            "2.4.6",
            [("https://files.pythonhosted.org/numpy-2.4.6-cp311-linux.whl", H["b"]), ("https://files.pythonhosted.org/numpy-2.4.6.tar.gz", H["c"])],
        ),
    }
)
CPU = AcceleratorMatrix.parse(repo_file("3rdparty/accelerators.toml")).accelerators["cpu"]


def _txt() -> str:
    reqs = exportable_requirements(Lockfile.of("lockfiles/demo-cpu.lock", LOCK.encode()))
    return requirements_txt("backends/demo:cpu", "demo-cpu", "lockfiles/demo-cpu.lock", "f" * 64, CPU, reqs)


def test_requirements_are_in_pip_tools_hashed_format() -> None:
    body = [l for l in _txt().splitlines() if not l.startswith("#")]
    assert body == [
        "numpy==2.4.6 \\",
        f"    --hash=sha256:{H['b']} \\",
        f"    --hash=sha256:{H['c']}",
        "torch==2.13.0+cpu \\",
        f"    --hash=sha256:{H['a']}",
    ]


def test_wheelhouse_artifacts_keep_their_hash_and_get_find_links_guidance() -> None:
    header = [l for l in _txt().splitlines() if l.startswith("#")]
    text = "\n".join(header)
    assert "torch==2.13.0+cpu: cpu/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl" in text
    assert "--find-links ~/.cache/localai-build/wheelhouse/cpu" in text
    assert "https://download.pytorch.org/whl/cpu" in text
    assert "${WHEELHOUSE}" not in _txt()  # no unexpanded lock placeholder reaches pip


def test_bad_lockfile() -> None:
    with pytest.raises(LockfileFormatError, match="lockfiles/x.lock: not a Pants lockfile"):
        Lockfile.of("lockfiles/x.lock", b"// header\n{}").requirements()
    two_versions = {"locked_resolves": [
        {"locked_requirements": [{"project_name": "numpy", "version": v, "artifacts": [{"url": "u", "algorithm": "sha256", "hash": "0"}]}]}
        for v in ("2.4.6", "2.4.7")
    ]}
    with pytest.raises(ExportLockfileError, match="numpy is locked twice .2.4.6 and 2.4.7"):
        exportable_requirements(Lockfile.of("lockfiles/x.lock", ("// h\n" + json.dumps(two_versions)).encode()))


def _goal_runner():
    rule_runner = make_rule_runner(QueryRule(BuiltPackage, [ExportFieldSet]))
    rule_runner.write_files(
        {
            **backend_files("demo", {"cpu": "", "metal": ""}),
            "lockfiles/demo-cpu.lock": LOCK,
            "tests/BUILD": 'localai_requirements_export(name="demo-cpu", variant="backends/demo:cpu")\n'
            'localai_requirements_export(name="not-a-variant", variant="backends/demo:src")\n',
        }
    )
    return rule_runner


def test_goal_writes_requirements_and_conda_env_and_lists_variants_without_lockfile() -> None:
    rule_runner = _goal_runner()
    result = rule_runner.run_goal_rule(ExportGoal, global_args=resolve_options("demo", ["cpu", "metal"]))
    assert result.exit_code == 0
    assert "skipped backends/demo:metal: no lockfiles/demo-metal.lock" in result.stderr
    out = Path(rule_runner.build_root, "dist/export/demo-cpu")
    assert (out / "requirements.txt").read_text().count("--hash=sha256:") == 3
    env = yaml.safe_load((out / "environment.yml").read_text())
    assert env["name"] == "localai-demo-cpu"
    assert env["dependencies"][:2] == ["python=3.11", "pip"]
    assert env["dependencies"][2]["pip"] == [
        f"numpy==2.4.6 --hash=sha256:{H['b']} --hash=sha256:{H['c']}",
        f"torch==2.13.0+cpu --hash=sha256:{H['a']}",
    ]
    assert not Path(rule_runner.build_root, "dist/export/demo-metal").exists()


def test_export_target_packages_the_same_files_and_checks_its_variant() -> None:
    rule_runner = _goal_runner()
    rule_runner.set_options(resolve_options("demo", ["cpu", "metal"]))
    tgt = rule_runner.get_target(Address("tests", target_name="demo-cpu"))
    built = rule_runner.request(BuiltPackage, [ExportFieldSet.create(tgt)])
    assert [a.relpath for a in built.artifacts] == ["export/demo-cpu/requirements.txt", "export/demo-cpu/environment.yml"]
    bad = rule_runner.get_target(Address("tests", target_name="not-a-variant"))
    with pytest.raises(ExecutionError, match="variant=.backends/demo:src. is not a localai_backend_variant"):
        rule_runner.request(BuiltPackage, [ExportFieldSet.create(bad)])
