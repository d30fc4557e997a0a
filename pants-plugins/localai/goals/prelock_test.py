"""`localai-prelock` then `generate-lockfiles`, for real: the pinned uv (the committed
lockfiles/uv.lock) resolves a small requirement set from PyPI in a Pants process, its pins land
in the variant's own pip options file, `pants lint` finds them current, and pex locks the resolve
with them as constraints: exactly the pinned versions, which Pants records in the lockfile's
metadata (so changed pins make the lockfile stale by Pants' own check). No mocks.
"""
from __future__ import annotations

import json
from pathlib import Path

from pants.core.goals.generate_lockfiles import GenerateLockfilesGoal
from pants.core.goals.lint import LintResult
from pants.engine.addresses import Address
from pants.testutil.rule_runner import QueryRule

from localai.goals.prelock import PrelockGoal
from localai.goals.resolves import ResolvesGoal
from localai.lint.generated import GeneratedCheckRequest, GeneratedFileFieldSet
from localai.model.prelock import split_pin_block
from localai.testutil import PANTS_TOML, backend_files, make_rule_runner, pex_cli_options, repo_file, repo_options

OWN = "3rdparty/accelerators/variants/demo-cpu.txt"
# A loose requirement beside an exact pin of one of its dependencies (outetts' shape, small).
REQUIREMENTS = "requests\nidna==3.10\n"
OPTIONS = [
    *pex_cli_options(),
    *repo_options(),
    f"--python-resolves={ {'demo-cpu': 'lockfiles/demo-cpu.lock', 'uv': 'lockfiles/uv.lock'}!r}",
    f"--python-resolves-to-constraints-file={ {'demo-cpu': OWN}!r}",
    "--uv-install-from-resolve=uv",
    "--uv-requirements=['//3rdparty/uv:uv']",
]
ENV = {"PATH", "PYENV_ROOT", "HOME"}


def _goal(rule_runner, goal, *args):
    result = rule_runner.run_goal_rule(goal, global_args=OPTIONS, args=list(args), env_inherit=ENV)
    rule_runner.set_options(OPTIONS, env_inherit=ENV)
    return result


def test_uv_pins_a_resolve_and_pex_locks_exactly_those_pins() -> None:
    rule_runner = make_rule_runner(QueryRule(LintResult, [GeneratedCheckRequest.Batch]))
    rule_runner.write_files(
        {
            **backend_files("demo", {"cpu": ""}, base=REQUIREMENTS),
            "backends/demo/BUILD": 'localai_backend(accelerators=["cpu"], prelock=["cpu"])\n',
            "3rdparty/accelerators/cpu.txt": repo_file("3rdparty/accelerators/cpu.txt"),
            "3rdparty/uv/BUILD": repo_file("3rdparty/uv/BUILD"),
            "lockfiles/uv.lock": repo_file("lockfiles/uv.lock"),
            "pants.toml": PANTS_TOML,
            "BUILD": 'localai_pants_toml(name="t")\n',
        }
    )
    assert _goal(rule_runner, ResolvesGoal).exit_code == 0

    result = _goal(rule_runner, PrelockGoal, "--resolve=demo-cpu")
    assert result.exit_code == 0, result.stderr
    assert "Now lock: ./pants localai-lock --resolve=demo-cpu" in result.stdout
    text = Path(rule_runner.build_root, OWN).read_text()
    assert "--find-links file://${LOCALAI_WHEELHOUSE}/cpu/\n" in text  # the accelerator's options stay
    _, block = split_pin_block(text, path=OWN, resolve="demo-cpu")
    assert block is not None and block.tool.startswith("uv 0.13.8")
    pins = dict(p.split("==") for p in block.pins)
    assert set(pins) == {"certifi", "charset-normalizer", "idna", "requests", "urllib3"} and pins["idna"] == "3.10"
    tgt = rule_runner.get_target(Address("", target_name="t"))
    lint = rule_runner.request(LintResult, [GeneratedCheckRequest.Batch("localai-generated-check", (GeneratedFileFieldSet.create(tgt),), None)])
    assert lint.exit_code == 0, lint.stdout

    assert _goal(rule_runner, GenerateLockfilesGoal, "--resolve=demo-cpu").exit_code == 0
    lock = Path(rule_runner.build_root, "lockfiles/demo-cpu.lock").read_text()
    body = json.loads("\n".join(line for line in lock.splitlines() if not line.startswith("//")))
    locked = {r["project_name"]: r["version"] for r in body["locked_resolves"][0]["locked_requirements"]}
    assert locked == pins
    assert all(a["algorithm"] == "sha256" for r in body["locked_resolves"][0]["locked_requirements"] for a in r["artifacts"])
    # Pants' metadata holds the pins: its staleness check follows them.
    meta = lock.split("// --- BEGIN PANTS LOCKFILE METADATA: DO NOT EDIT OR REMOVE ---")[1].split("// --- END")[0]
    metadata = json.loads("\n".join(line[3:] for line in meta.splitlines() if line.startswith("// ")))
    assert sorted(metadata["requirement_constraints"]) == sorted(block.pins)
