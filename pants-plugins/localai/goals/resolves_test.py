from __future__ import annotations

from pathlib import Path

import pytest
from pants.core.goals.lint import LintResult
from pants.engine.addresses import Address
from pants.testutil.rule_runner import QueryRule

from localai.goals.prelock_inputs import PrelockInputs, PrelockInputsRequest
from localai.goals.resolves import (
    BEGIN,
    END,
    ResolveEntry,
    ResolvesConfigError,
    ResolvesGoal,
    option_lines,
    render_variant_pip_options,
    update_pants_toml,
)
from localai.lint.generated import GeneratedCheckRequest, GeneratedFileFieldSet
from localai.model.prelock import PinBlock
from localai.testutil import PANTS_TOML, backend_files, make_rule_runner, resolve_options

CPU = ResolveEntry("demo-cpu", "lockfiles/demo-cpu.lock", "3rdparty/accelerators/cpu.txt", "backends/demo")
CUDA = ResolveEntry("demo-cuda13", "lockfiles/demo-cuda13.lock", "3rdparty/accelerators/cuda13.txt", "backends/demo")


def test_block_is_written_sorted_idempotent_and_removable() -> None:
    once = update_pants_toml(PANTS_TOML, (CUDA, CPU))
    lines = once.splitlines()
    start = lines.index("[python.resolves]")
    assert lines[start + 1 : start + 6] == [
        'tests = "lockfiles/tests.lock"',
        BEGIN,
        '"demo-cpu" = "lockfiles/demo-cpu.lock"',
        '"demo-cuda13" = "lockfiles/demo-cuda13.lock"',
        END,
    ]
    assert '"demo-cuda13" = "3rdparty/accelerators/cuda13.txt"' in once
    assert update_pants_toml(once, (CPU, CUDA)) == once
    assert "[python-repos]" in once and 'tests = "3rdparty/accelerators/cpu.txt"' in once
    assert update_pants_toml(once, ()) == PANTS_TOML


def test_broken_block_or_missing_table_names_the_fix() -> None:
    with pytest.raises(ResolvesConfigError, match=r"no \[python.resolves\] table"):
        update_pants_toml("[GLOBAL]\n", (CPU,))
    broken = PANTS_TOML.replace('tests = "lockfiles/tests.lock"', f'tests = "lockfiles/tests.lock"\n{BEGIN}')
    with pytest.raises(ResolvesConfigError, match="no `# Generated: end.` after it"):
        update_pants_toml(broken, (CPU,))


def _runner():
    rule_runner = make_rule_runner(QueryRule(LintResult, [GeneratedCheckRequest.Batch]))
    rule_runner.write_files(
        {**backend_files("demo", {"cpu": "", "cuda13": ""}), "pants.toml": PANTS_TOML, "BUILD": 'localai_pants_toml(name="t")\n'}
    )
    return rule_runner


def _lint(rule_runner) -> LintResult:
    tgt = rule_runner.get_target(Address("", target_name="t"))
    return rule_runner.request(
        LintResult, [GeneratedCheckRequest.Batch("localai-generated-check", (GeneratedFileFieldSet.create(tgt),), None)]
    )


def test_goal_writes_the_entries_of_the_build_files_and_lint_follows() -> None:
    # The variants' entries are missing from pants.toml: listing them must still work (no
    # pants.toml check on the way), lint fails, the goal writes them, lint passes.
    rule_runner = _runner()
    stale = _lint(rule_runner)
    assert stale.exit_code == 1 and "run `./pants localai-resolves`" in stale.stdout
    assert rule_runner.run_goal_rule(ResolvesGoal, args=["--check"]).exit_code == 1
    result = rule_runner.run_goal_rule(ResolvesGoal)
    assert result.exit_code == 0, result.stderr
    written = Path(rule_runner.build_root, "pants.toml").read_text()
    assert written == update_pants_toml(PANTS_TOML, (CPU, CUDA))
    assert _lint(rule_runner).exit_code == 0
    assert rule_runner.run_goal_rule(ResolvesGoal, args=["--check"]).exit_code == 0


def test_a_variants_own_pip_options_are_written_and_an_orphan_fails_lint() -> None:
    rule_runner = _runner()
    rule_runner.write_files({
        "backends/demo/BUILD": 'localai_backend(accelerators=["cpu"])\n'
        'localai_backend_variant(name="own", accelerator="cuda13", extra_indexes=["https://wheels.example.org/cu130"])\n',
        "3rdparty/accelerators/cuda13.txt": "# PyPI only.\n",
        "3rdparty/accelerators/variants/gone-cuda13.txt": "--extra-index-url https://gone.invalid/simple\n",
    })
    result = rule_runner.run_goal_rule(ResolvesGoal)
    own = "3rdparty/accelerators/variants/demo-cuda13.txt"
    assert f'"demo-cuda13" = "{own}"' in Path(rule_runner.build_root, "pants.toml").read_text()
    assert Path(rule_runner.build_root, own).read_text().endswith("\n--extra-index-url https://wheels.example.org/cu130\n")
    # The orphan is named, with the fix, by the goal and by lint.
    orphan = "3rdparty/accelerators/variants/gone-cuda13.txt: no variant's resolve names it"
    assert result.exit_code == 1 and orphan in result.stderr and "Fix: delete it." in result.stderr
    lint = _lint(rule_runner)
    assert lint.exit_code == 1 and orphan in lint.stdout
    gone = "3rdparty/accelerators/variants/gone-cuda13.txt"
    Path(rule_runner.build_root, gone).unlink()
    # Invalidate at once: the file watcher would notice the unlink only some time later (CI saw the
    # orphan still listed).
    rule_runner.scheduler.invalidate_files({gone, str(Path(gone).parent)})
    assert _lint(rule_runner).exit_code == 0


CPU_OPTIONS = "# the wheelhouse\n--find-links file://${LOCALAI_WHEELHOUSE}/cpu/\n"
OWN = "3rdparty/accelerators/variants/demo-cpu.txt"
PRELOCKED = ResolveEntry("demo-cpu", "lockfiles/demo-cpu.lock", OWN, "backends/demo", (), "3rdparty/accelerators/cpu.txt", True)


# The resolves as pants.toml declares them (run_goal_rule replaces the options: pass them each time).
DEMO_OPTIONS = [
    *resolve_options("demo", ["cpu", "cuda13"], matrix_pip={"cpu": OWN}),
    "--python-interpreter-constraints=['CPython==3.11.*']",
]


def _resolves_goal(rule_runner, *args):
    result = rule_runner.run_goal_rule(ResolvesGoal, global_args=DEMO_OPTIONS, args=list(args))
    rule_runner.set_options(DEMO_OPTIONS)
    return result


def _prelock_runner():
    rule_runner = make_rule_runner(
        QueryRule(LintResult, [GeneratedCheckRequest.Batch]), QueryRule(PrelockInputs, [PrelockInputsRequest])
    )
    rule_runner.write_files(
        {
            **backend_files("demo", {"cpu": "", "cuda13": ""}),
            "backends/demo/BUILD": 'localai_backend(accelerators=["cpu", "cuda13"], prelock=["cpu"])\n',
            "3rdparty/accelerators/cpu.txt": CPU_OPTIONS,
            "pants.toml": PANTS_TOML,
            "BUILD": 'localai_pants_toml(name="t")\n',
        }
    )
    rule_runner.set_options(DEMO_OPTIONS)
    return rule_runner


def _read(rule_runner, path: str) -> str:
    return Path(rule_runner.build_root, path).read_text()


def test_a_prelocked_variants_pins_are_kept_by_the_goal_and_checked_by_lint() -> None:
    rule_runner = _prelock_runner()
    assert _resolves_goal(rule_runner).exit_code == 0
    assert f'"demo-cpu" = "{OWN}"' in _read(rule_runner, "pants.toml")
    assert _read(rule_runner, OWN) == render_variant_pip_options(PRELOCKED, CPU_OPTIONS)
    assert "--find-links file://${LOCALAI_WHEELHOUSE}/cpu/\n" in _read(rule_runner, OWN) and "the wheelhouse" not in _read(rule_runner, OWN)
    missing = _lint(rule_runner)
    assert missing.exit_code == 1 and f"{OWN}: backends/demo/BUILD sets prelock but the file has no pins yet" in missing.stdout
    assert "run `./pants localai-prelock --resolve=demo-cpu`, then `./pants generate-lockfiles --resolve=demo-cpu`" in missing.stdout

    # Pins as `localai-prelock` writes them, resolved from what generate-lockfiles reads.
    inputs = rule_runner.request(PrelockInputs, [PrelockInputsRequest("demo-cpu", option_lines(PRELOCKED, CPU_OPTIONS))])
    assert inputs.requirements == ("grpcio-tools==1.85.1", "torch") and inputs.python == "3.11"
    block = PinBlock.create("demo-cpu", "uv 0.13.8", "x86_64-manylinux_2_28, CPython 3.11", inputs.digest, ["grpcio-tools==1.85.1", "torch==2.13.0+cpu"])
    rule_runner.write_files({OWN: render_variant_pip_options(PRELOCKED, CPU_OPTIONS, block)})
    assert _lint(rule_runner).exit_code == 0
    # localai-resolves renders the file again, keeping the block.
    assert _resolves_goal(rule_runner, "--check").exit_code == 0

    # A requirement changes: the pins no longer say what the resolve is.
    rule_runner.write_files({"backends/demo/requirements.txt": "grpcio-tools==1.85.1\ntorch\nsix\n"})
    stale = _lint(rule_runner)
    assert stale.exit_code == 1 and f"{OWN}: its pins are stale" in stale.stdout and "localai-prelock --resolve=demo-cpu" in stale.stdout

    # A hand edit of the block: lint names it; localai-resolves refuses to drop or keep it.
    edited = render_variant_pip_options(PRELOCKED, CPU_OPTIONS, block).replace("torch==2.13.0+cpu", "torch==2.12.0+cpu")
    rule_runner.write_files({OWN: edited})
    lint = _lint(rule_runner)
    assert lint.exit_code == 1 and f"{OWN}: the pins of its generated block were edited by hand" in lint.stdout
    result = _resolves_goal(rule_runner)
    assert result.exit_code == 1 and "edited by hand" in result.stderr and _read(rule_runner, OWN) == edited
