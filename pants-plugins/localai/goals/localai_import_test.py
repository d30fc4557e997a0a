from __future__ import annotations

from pathlib import Path

import pytest
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from localai.goals.localai_import import LocalAIImportGoal, import_entries, plan_import
from localai.goals.resolves import ResolveEntry, ResolvesGoal
from localai.model.accelerators import AcceleratorMatrix
from localai.model.localai_layout import LocalAIConventions
from localai.model.requirements import LayeredRequirements, LayeredRequirementsRequest
from localai.testutil import PANTS_TOML, make_rule_runner, repo_file

MATRIX = repo_file("3rdparty/accelerators.toml")
ROOT = "backends/localai"
# A LocalAI-style folder: their file names, a CUDA-pulling CPU pin, their other files.
RERANK = {
    "backend.py": "",
    "run.sh": "",
    "install.sh": "",
    "test.py": "",
    "Makefile": "",
    "requirements.txt": "grpcio==1.85.3\nprotobuf\ncertifi\n",
    "requirements-cpu.txt": "transformers\ntorch==2.7.1\n",
    "requirements-cublas13.txt": "transformers\ntorch==2.7.1\n",
    "requirements-intel.txt": "--extra-index-url https://download.pytorch.org/whl/xpu\ntorch\n",
    "requirements-l4t13.txt": "torch\n",
}


@pytest.fixture(scope="module")
def matrix() -> AcceleratorMatrix:
    return AcceleratorMatrix.parse(MATRIX)


@pytest.fixture(scope="module")
def conventions(matrix) -> LocalAIConventions:
    return LocalAIConventions.parse(MATRIX, matrix)


def test_one_build_line_per_folder_and_only_profiles_with_a_file(matrix, conventions) -> None:
    plan = plan_import(ROOT, {"common": {"grpc_auth.py": ""}, "rerank": RERANK}, matrix, conventions)
    assert plan.problems == ()
    build = plan.build_files[f"{ROOT}/rerank/BUILD"].splitlines()
    assert build[1:] == [ARM64_LINE]
    assert plan.build_files[f"{ROOT}/common/BUILD"].endswith("localai_common()\n")
    assert [v.resolve for v in plan.variants] == [
        "localai-rerank-cpu", "localai-rerank-cpu-arm64", "localai-rerank-cuda13", "localai-rerank-intel"
    ]
    cpu = plan.variants[0]
    assert cpu.replacements == ("requirements-cpu.txt pinned torch==2.7.1; cpu provides torch==2.13.0+cpu",)
    # l4t13 is LocalAI's, not an accelerator here: read, noted, not declared.
    assert f"{ROOT}/rerank: profile l4t13 has no accelerator here; not declared" in plan.notes


def test_unsatisfiable_policy_declares_the_variant_not_lockable(matrix, conventions) -> None:
    folder = {"backend.py": "", "requirements-cpu.txt": "torch\ntorchaudio\n"}
    plan = plan_import(ROOT, {"common": {}, "tts": folder}, matrix, conventions)
    line = plan.build_files[f"{ROOT}/tts/BUILD"].splitlines()[1]
    assert line.startswith('localai_import(accelerators=["cpu"], arm64=["cpu"], arm64_tags=["by-hand"], not_lockable_here={"cpu": ')
    assert "requirements-cpu.txt needs torchaudio; cpu provides no torchaudio build here" in line


@pytest.mark.parametrize(
    "name, folder, expected",
    [
        (
            "nobackend",
            {"requirements-cpu.txt": "torch\n"},
            f"{ROOT}/nobackend/backend.py is missing",
        ),
        (
            "badindex",
            {"backend.py": "", "requirements-cpu.txt": "--extra-index-url https://download.pytorch.org/whl/cu121\ntorch\n"},
            f"{ROOT}/badindex/requirements-cpu.txt line 1: `--extra-index-url https://download.pytorch.org/whl/cu121` "
            "would break the cpu accelerator's index isolation",
        ),
        (
            "badprofile",
            {"backend.py": "", "requirements-cpu.txt": "torch\n", "requirements-rocm.txt": "torch\n"},
            f"{ROOT}/badprofile/requirements-rocm.txt: 'rocm' is not a LocalAI build profile",
        ),
    ],
)
def test_bad_folders_are_skipped_naming_the_file(matrix, conventions, name, folder, expected) -> None:
    plan = plan_import(ROOT, {"common": {}, name: folder, "rerank": RERANK}, matrix, conventions)
    assert [s.directory for s in plan.skipped] == [f"{ROOT}/{name}"]
    assert plan.problems[0].startswith(f"skipped {ROOT}/{name}: {expected}"), plan.problems
    assert "Fix:" in plan.problems[0]
    assert f"{ROOT}/{name}/BUILD" not in plan.build_files
    # Every other folder is still written.
    assert f"{ROOT}/rerank/BUILD" in plan.build_files
    assert plan.summary(ROOT) == f"{ROOT}: imported 1 of 2 folders"


def test_an_unparseable_shared_line_skips_the_folder_naming_file_and_line(matrix, conventions) -> None:
    folder = {"backend.py": "", "requirements.txt": "grpcio\nsetuptools>=70 <80!\n", "requirements-cpu.txt": "torch\n"}
    plan = plan_import(ROOT, {"common": {}, "odd": folder}, matrix, conventions)
    (skip,) = plan.skipped
    assert skip.accelerator is None
    assert f"{ROOT}/odd/requirements.txt" in skip.reason and "line 2" in skip.reason, skip.reason
    assert "Fix:" in skip.reason
    assert plan.imported == ()


def test_one_profiles_foreign_index_skips_that_variant_alone(matrix, conventions) -> None:
    folder = dict(RERANK, **{"requirements-intel.txt": "--extra-index-url https://example.invalid/simple\ntorch\n"})
    plan = plan_import(ROOT, {"common": {}, "rerank": folder}, matrix, conventions)
    assert [(s.directory, s.accelerator) for s in plan.skipped] == [(f"{ROOT}/rerank", "intel")]
    assert "requirements-intel.txt line 1" in plan.skipped[0].reason
    assert [v.name for v in plan.variants] == ["cpu", "cpu-arm64", "cuda13"]
    assert plan.imported == ("rerank",)
    assert plan.summary(ROOT) == f"{ROOT}: imported 1 of 1 folders; 1 variant(s) of imported folders skipped"


def test_missing_common_is_a_problem(matrix, conventions) -> None:
    plan = plan_import(ROOT, {"rerank": RERANK}, matrix, conventions)
    assert plan.problems[0].startswith(f"skipped {ROOT}/common: {ROOT}/common/ is missing")


def test_import_entries_replace_the_roots_variants_and_keep_the_others(matrix, conventions) -> None:
    plan = plan_import(ROOT, {"common": {}, "rerank": RERANK}, matrix, conventions)
    old = ResolveEntry("localai-gone-cpu", "lockfiles/localai-gone-cpu.lock", "3rdparty/accelerators/cpu.txt", f"{ROOT}/gone")
    bark = ResolveEntry("bark-cpu", "lockfiles/bark-cpu.lock", "3rdparty/accelerators/cpu.txt", "backends/bark")
    entries = import_entries(ROOT, (old, bark), plan)
    assert [e.resolve for e in entries] == [
        "bark-cpu", "localai-rerank-cpu", "localai-rerank-cpu-arm64", "localai-rerank-cuda13", "localai-rerank-intel"
    ]
    assert entries[3] == ResolveEntry(
        "localai-rerank-cuda13", "lockfiles/localai-rerank-cuda13.lock", "3rdparty/accelerators/cuda13.txt", f"{ROOT}/rerank"
    )


def _repo() -> dict[str, str]:
    files = {
        "pants.toml": PANTS_TOML,
        "3rdparty/accelerators.toml": MATRIX,
        f"{ROOT}/common/grpc_auth.py": "",
    }
    files.update({f"{ROOT}/rerank/{k}": v for k, v in RERANK.items()})
    return files


def _run(rule_runner: RuleRunner, *args: str):
    return rule_runner.run_goal_rule(LocalAIImportGoal, args=[*args, ROOT], env_inherit={"PATH"})


def test_goal_writes_build_files_and_pants_toml_and_reruns_unchanged() -> None:
    rule_runner = make_rule_runner()
    rule_runner.write_files(_repo())
    before = Path(rule_runner.build_root, ROOT, "rerank", "requirements-cpu.txt").read_text()
    result = _run(rule_runner)
    assert result.exit_code == 0, result.stderr
    assert "requirements-cpu.txt pinned torch==2.7.1; cpu provides torch==2.13.0+cpu" in result.stdout
    toml_text = Path(rule_runner.build_root, "pants.toml").read_text()
    assert '"localai-rerank-intel" = "3rdparty/accelerators/intel.txt"' in toml_text
    assert Path(rule_runner.build_root, ROOT, "rerank", "BUILD").read_text().endswith(ARM64_LINE + "\n")
    # The backend's own files are only read.
    assert Path(rule_runner.build_root, ROOT, "rerank", "requirements-cpu.txt").read_text() == before
    assert _run(rule_runner, "--check").exit_code == 0
    again = _run(rule_runner)
    assert again.exit_code == 0 and "wrote" not in again.stdout
    assert Path(rule_runner.build_root, "pants.toml").read_text() == toml_text


def test_goal_skips_a_broken_folder_writes_the_others_and_fails_unless_allowed() -> None:
    rule_runner = make_rule_runner()
    rule_runner.write_files({**_repo(), f"{ROOT}/broken/requirements-cpu.txt": "torch\n"})
    result = _run(rule_runner)
    assert result.exit_code == 1
    assert f"skipped {ROOT}/broken: {ROOT}/broken/backend.py is missing" in result.stderr
    assert f"localai-import: {ROOT}: imported 1 of 2 folders" in result.stderr
    # The other folder is written, the broken one is not.
    assert Path(rule_runner.build_root, ROOT, "rerank", "BUILD").exists()
    assert not Path(rule_runner.build_root, ROOT, "broken", "BUILD").exists()
    toml_text = Path(rule_runner.build_root, "pants.toml").read_text()
    assert '"localai-rerank-cpu"' in toml_text and "localai-broken" not in toml_text
    # Re-runs write the same bytes; --check finds them current but still reports the skip.
    check = _run(rule_runner, "--check")
    assert check.exit_code == 1 and "is not current" not in check.stderr and "skipped" in check.stderr
    allowed = _run(rule_runner, "--allow-skipped")
    assert allowed.exit_code == 0 and "wrote" not in allowed.stdout, allowed.stderr
    assert _run(rule_runner, "--check", "--allow-skipped").exit_code == 0
    assert Path(rule_runner.build_root, "pants.toml").read_text() == toml_text


def test_goal_check_fails_when_not_current() -> None:
    rule_runner = make_rule_runner()
    rule_runner.write_files(_repo())
    result = _run(rule_runner, "--check")
    assert result.exit_code == 1
    assert f"{ROOT}/rerank/BUILD is not current" in result.stderr
    assert Path(rule_runner.build_root, "pants.toml").read_text() == PANTS_TOML


def _git_repo(path: Path) -> str:
    """A git repository with one commit tagged v1; returns the commit."""
    import subprocess

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e.invalid", "HOME": str(path), "PATH": "/usr/bin:/bin"}
    path.mkdir(parents=True)
    (path / "setup.py").write_text("")
    for args in (["init", "-q", "."], ["add", "."], ["commit", "-qm", "one"], ["tag", "v1"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, env=env, check=True, capture_output=True, text=True).stdout.strip()


def test_goal_pins_git_refs_once_and_an_unreachable_one_is_not_lockable(tmp_path: Path) -> None:
    commit = _git_repo(tmp_path / "tiny")
    reachable, unreachable = f"git+file://{tmp_path}/tiny@v1", f"git+file://{tmp_path}/missing@v1"
    rule_runner = make_rule_runner(QueryRule(LayeredRequirements, [LayeredRequirementsRequest]))
    rule_runner.write_files({
        **_repo(),
        f"{ROOT}/gitdep/backend.py": "",
        f"{ROOT}/gitdep/requirements-cpu.txt": f"{reachable}\n",
        f"{ROOT}/gone/backend.py": "",
        f"{ROOT}/gone/requirements-cpu.txt": f"{unreachable}\n",
    })
    result = _run(rule_runner)
    assert result.exit_code == 0, result.stderr
    assert f"git pin: {reachable} -> {commit} (v1)" in result.stdout
    assert f"git pin: {unreachable} not pinned: `git ls-remote file://{tmp_path}/missing v1` failed" in result.stderr
    pins = Path(rule_runner.build_root, "3rdparty/localai-git-pins.toml").read_text()
    assert f'"{reachable}" = "{commit}"' in pins and "missing" not in pins
    assert Path(rule_runner.build_root, ROOT, "gitdep", "BUILD").read_text().endswith(
        'localai_import(accelerators=["cpu"], arm64=["cpu"], arm64_tags=["by-hand"])\n'
    )
    gone = Path(rule_runner.build_root, ROOT, "gone", "BUILD").read_text()
    assert 'not_lockable_here={"cpu": \'cannot be built here: requirements-cpu.txt line 1: `' + unreachable in gone
    # The resolve reads the pinned commit.
    assert f"tiny@ git+file://localhost{tmp_path}/tiny@{commit}" in rule_runner.request(
        LayeredRequirements, [LayeredRequirementsRequest(f"{ROOT}/gitdep", "cpu", "t", "localai")]
    ).requirements
    # A re-run asks git only about the unpinned URL and writes the same bytes.
    again = _run(rule_runner)
    assert again.exit_code == 0 and "wrote" not in again.stdout and f"git pin: {reachable}" not in again.stdout
    assert _run(rule_runner, "--check").exit_code == 0


# A folder-scoped extra index (vllm's requirements-cublas13.txt names wheels.vllm.ai's cu130 wheels).
OWN_INDEX = "https://wheels.example.org/0.1/cu130"
LLM = {
    "backend.py": "",
    "requirements.txt": "grpcio==1.85.3\n",
    "requirements-cpu.txt": "llmlib==0.1\n",
    "requirements-cublas13.txt": f"--extra-index-url {OWN_INDEX}\nllmlib==0.1\n",
}
DECLARED = f'\n[localai.overrides.llm]\nextra_indexes = {{ cuda13 = ["{OWN_INDEX}"] }}\n'


def test_a_declared_folder_index_is_seen_by_that_variants_resolve_alone(matrix) -> None:
    conventions = LocalAIConventions.parse(MATRIX + DECLARED, matrix)
    # The same line in the cuda12 profile's file: declared for cuda13 only, so refused there.
    folder = dict(LLM, **{"requirements-cublas12.txt": f"--extra-index-url {OWN_INDEX}\nllmlib==0.1\n"})
    plan = plan_import(ROOT, {"common": {}, "llm": folder}, matrix, conventions)
    assert plan.build_files[f"{ROOT}/llm/BUILD"].splitlines()[1] == (
        f'localai_import(accelerators=["cpu", "cuda13"], arm64=["cpu"], arm64_tags=["by-hand"], extra_indexes={{"cuda13": ["{OWN_INDEX}"]}})'
    )
    by_accel = {v.name: v for v in plan.variants}
    assert by_accel["cuda13"].extra_indexes == (OWN_INDEX,)
    assert by_accel["cuda13"].pip_options == "3rdparty/accelerators/variants/localai-llm-cuda13.txt"
    assert f"requirements-cublas13.txt line 1 names index {OWN_INDEX}: seen by this cuda13 variant's resolve alone" in (
        " ".join(by_accel["cuda13"].replacements)
    )
    assert by_accel["cpu"].extra_indexes == () and by_accel["cpu"].pip_options == "3rdparty/accelerators/cpu.txt"
    [skip] = plan.skipped
    assert (skip.directory, skip.accelerator) == (f"{ROOT}/llm", "cuda12")
    assert f"{ROOT}/llm/requirements-cublas12.txt line 1: `--extra-index-url {OWN_INDEX}`" in skip.reason
    entries = {e.resolve: e for e in import_entries(ROOT, (), plan)}
    assert entries["localai-llm-cuda13"] == ResolveEntry(
        "localai-llm-cuda13",
        "lockfiles/localai-llm-cuda13.lock",
        "3rdparty/accelerators/variants/localai-llm-cuda13.txt",
        f"{ROOT}/llm",
        (OWN_INDEX,),
        "3rdparty/accelerators/cuda13.txt",
    )
    assert entries["localai-llm-cpu"].pip_options == "3rdparty/accelerators/cpu.txt"


def test_an_undeclared_folder_index_skips_the_variant_naming_file_line_and_the_declaration(matrix, conventions) -> None:
    plan = plan_import(ROOT, {"common": {}, "llm": LLM}, matrix, conventions)
    [skip] = plan.skipped
    assert (skip.directory, skip.accelerator) == (f"{ROOT}/llm", "cuda13")
    assert skip.reason.startswith(f"{ROOT}/llm/requirements-cublas13.txt line 1: `--extra-index-url {OWN_INDEX}`"), skip.reason
    assert (
        f'Fix: move the line to the requirement file of the profile whose index it is, or declare that index for cuda13 in '
        f'3rdparty/accelerators.toml. If the index belongs to this folder\'s cuda13 variant alone, declare it: '
        f'`[localai.overrides.llm] extra_indexes = {{ cuda13 = ["{OWN_INDEX}"] }}` in 3rdparty/accelerators.toml'
    ) in skip.reason
    assert [v.name for v in plan.variants] == ["cpu", "cpu-arm64"]


def test_the_repository_declares_vllms_cu130_wheels_for_its_cuda13_variant_alone(matrix, conventions) -> None:
    url = "https://wheels.vllm.ai/0.27.1/cu130"
    assert dict(conventions.overrides["vllm"].extra_indexes) == {"cuda13": (url,)}
    folder = {
        "backend.py": "",
        "requirements-cpu.txt": "vllm\n",
        "requirements-cublas13.txt": f"--extra-index-url {url}\nvllm\n",
        "requirements-cublas12.txt": f"--extra-index-url {url}\nvllm\n",
    }
    plan = plan_import(ROOT, {"common": {}, "vllm": folder}, matrix, conventions)
    assert [(v.name, v.extra_indexes) for v in plan.variants] == [("cpu", ()), ("cpu-arm64", ()), ("cuda13", (url,))]
    assert [(s.accelerator, "line 1" in s.reason) for s in plan.skipped] == [("cuda12", True)]


def test_goal_writes_the_variants_own_pip_options_and_localai_resolves_agrees() -> None:
    rule_runner = make_rule_runner()
    rule_runner.write_files({
        "pants.toml": PANTS_TOML,
        "3rdparty/accelerators.toml": MATRIX + DECLARED,
        "3rdparty/accelerators/cpu.txt": repo_file("3rdparty/accelerators/cpu.txt"),
        "3rdparty/accelerators/cuda13.txt": "# PyPI only.\n--only-binary=:none:\n",
        f"{ROOT}/common/grpc_auth.py": "",
        **{f"{ROOT}/llm/{k}": v for k, v in LLM.items()},
    })
    result = _run(rule_runner)
    assert result.exit_code == 0, result.stderr
    own = "3rdparty/accelerators/variants/localai-llm-cuda13.txt"
    assert f"  extra index: {OWN_INDEX}, seen by localai-llm-cuda13 alone ({own})" in result.stdout
    toml_text = Path(rule_runner.build_root, "pants.toml").read_text()
    assert f'"localai-llm-cuda13" = "{own}"' in toml_text
    assert '"localai-llm-cpu" = "3rdparty/accelerators/cpu.txt"' in toml_text
    lines = Path(rule_runner.build_root, own).read_text().splitlines()
    # The accelerator's options (not its comments), then the folder's index; no other file names it.
    assert [x for x in lines if not x.startswith("#")] == ["--only-binary=:none:", f"--extra-index-url {OWN_INDEX}"]
    assert OWN_INDEX not in Path(rule_runner.build_root, "3rdparty/accelerators/cuda13.txt").read_text()
    assert _run(rule_runner, "--check").exit_code == 0
    # localai-resolves, reading the BUILD file written, renders the same pants.toml and file.
    assert rule_runner.run_goal_rule(ResolvesGoal, args=["--check"]).exit_code == 0
    # A stale own file is found by both goals.
    Path(rule_runner.build_root, own).write_text("--extra-index-url https://elsewhere.invalid/simple\n")
    assert rule_runner.run_goal_rule(ResolvesGoal, args=["--check"]).exit_code == 1
    assert _run(rule_runner, "--check").exit_code == 1


def test_a_prelocked_folder_variant_gets_its_own_pip_options_file(matrix) -> None:
    conventions = LocalAIConventions.parse(MATRIX + '\n[localai.overrides.llm]\nprelock = ["cpu"]\n', matrix)
    plan = plan_import(ROOT, {"common": {}, "llm": LLM}, matrix, conventions)
    assert plan.build_files[f"{ROOT}/llm/BUILD"].splitlines()[1] == (
        'localai_import(accelerators=["cpu"], arm64=["cpu"], arm64_tags=["by-hand"], prelock=["cpu"])'
    )
    cpu, arm64 = plan.variants
    assert not arm64.prelock and arm64.pip_options == "3rdparty/accelerators/cpu.txt"
    assert cpu.prelock and cpu.pip_options == "3rdparty/accelerators/variants/localai-llm-cpu.txt"
    entry, _ = import_entries(ROOT, (), plan)
    assert entry.prelock and entry.accelerator_pip_options == "3rdparty/accelerators/cpu.txt" and entry.extra_indexes == ()


def test_a_profile_built_from_the_shared_files_alone_is_declared_where_the_overrides_say(matrix) -> None:
    # LocalAI builds cpu-kitten-tts from requirements.txt alone; its folder has only an mps file besides.
    tts = {"backend.py": "", "requirements.txt": "grpcio==1.85.3\nnumpy\n", "requirements-mps.txt": "numpy\n"}
    plain = LocalAIConventions.parse(MATRIX, matrix)
    assert [v.accelerator for v in plan_import(ROOT, {"common": {}, "tts": tts}, matrix, plain).variants] == ["metal"]
    declared = LocalAIConventions.parse(MATRIX + '\n[localai.overrides.tts]\nprofiles = ["cpu"]\n', matrix)
    plan = plan_import(ROOT, {"common": {}, "tts": tts}, matrix, declared)
    assert [v.name for v in plan.variants] == ["cpu", "cpu-arm64", "metal"]
    assert plan.build_files[f"{ROOT}/tts/BUILD"].splitlines()[1] == 'localai_import(accelerators=["cpu", "metal"], arm64=["cpu"], arm64_tags=["by-hand"])'


def test_an_exempt_project_is_written_for_its_accelerators_variant_alone(matrix) -> None:
    table = '\n[localai.overrides.llm]\nexempt = { cpu = { "nvidia-ml-py" = "pure Python" } }\n'
    plan = plan_import(ROOT, {"common": {}, "llm": {**LLM, "requirements-cublas13.txt": "numpy\n"}}, matrix,
                       LocalAIConventions.parse(MATRIX + table, matrix))
    assert plan.build_files[f"{ROOT}/llm/BUILD"].splitlines()[1] == (
        'localai_import(accelerators=["cpu", "cuda13"], arm64=["cpu"], arm64_tags=["by-hand"], '
        'exempt={"cpu": {"nvidia-ml-py": "pure Python"}, "cpu-arm64": {"nvidia-ml-py": "pure Python"}})'
    )
    spared = (("nvidia-ml-py", "pure Python"),)
    assert [(v.name, v.exempt) for v in plan.variants] == [("cpu", spared), ("cpu-arm64", spared), ("cuda13", ())]


ARM64_LINE = 'localai_import(accelerators=["cpu", "cuda13", "intel"], arm64=["cpu"], arm64_tags=["by-hand"])'


def test_a_folder_with_a_cpu_profile_gets_a_cpu_arm64_variant_with_the_arm64_pin_policy(matrix, conventions) -> None:
    plan = plan_import(ROOT, {"common": {}, "rerank": RERANK}, matrix, conventions)
    assert plan.build_files[f"{ROOT}/rerank/BUILD"].splitlines()[1] == ARM64_LINE
    arm64 = next(v for v in plan.variants if v.platform.cross)
    assert (arm64.name, arm64.resolve, arm64.not_lockable, arm64.prelock) == ("cpu-arm64", "localai-rerank-cpu-arm64", None, False)
    assert arm64.replacements == ("requirements-cpu.txt pinned torch==2.7.1; cpu-arm64 provides torch==2.9.1",)
    # Its resolve entry is the accelerator's pip options and the platform's lockfile name.
    [entry] = [e for e in import_entries(ROOT, (), plan) if e.resolve.endswith("-arm64")]
    assert entry == ResolveEntry(
        "localai-rerank-cpu-arm64", "lockfiles/localai-rerank-cpu-arm64.lock", "3rdparty/accelerators/cpu.txt", f"{ROOT}/rerank"
    )


def test_a_folder_with_no_cpu_profile_gets_no_arm64_variant(matrix, conventions) -> None:
    # cuda13 lists linux_aarch64 too, but has no [localai.torch_family.cuda13-arm64]: nothing cross-built.
    folder = {"backend.py": "", "requirements.txt": "grpcio==1.85.3\n", "requirements-cublas13.txt": "torch\n"}
    plan = plan_import(ROOT, {"common": {}, "gpu": folder}, matrix, conventions)
    assert plan.build_files[f"{ROOT}/gpu/BUILD"].splitlines()[1] == 'localai_import(accelerators=["cuda13"])'
    assert [v.name for v in plan.variants] == ["cuda13"]


def test_a_torchaudio_folder_is_lockable_on_arm64_alone(matrix, conventions) -> None:
    folder = {"backend.py": "", "requirements-cpu.txt": "torch==2.7.1\ntorchaudio==2.7.1\n"}
    plan = plan_import(ROOT, {"common": {}, "tts": folder}, matrix, conventions)
    line = plan.build_files[f"{ROOT}/tts/BUILD"].splitlines()[1]
    assert line.startswith('localai_import(accelerators=["cpu"], arm64=["cpu"], arm64_tags=["by-hand"], not_lockable_here={"cpu": ')
    assert '"cpu-arm64"' not in line
    assert {v.name: v.not_lockable is None for v in plan.variants} == {"cpu": False, "cpu-arm64": True}


def test_overrides_reach_the_arm64_variant_keyed_by_variant(matrix) -> None:
    table = (
        '\n[localai.overrides.llm]\nprelock = ["cpu"]\nexempt = { cpu = { "nvidia-ml-py" = "pure Python" } }\n'
        'not_lockable = { "cpu-arm64" = "no aarch64 wheel of llmlib" }\n'
    )
    plan = plan_import(ROOT, {"common": {}, "llm": LLM}, matrix, LocalAIConventions.parse(MATRIX + table, matrix))
    assert plan.build_files[f"{ROOT}/llm/BUILD"].splitlines()[1] == (
        'localai_import(accelerators=["cpu"], arm64=["cpu"], arm64_tags=["by-hand"], '
        "not_lockable_here={\"cpu-arm64\": 'cannot be built here: no aarch64 wheel of llmlib ([localai.overrides.llm] in "
        "3rdparty/accelerators.toml)'}, prelock=[\"cpu\"], "
        'exempt={"cpu": {"nvidia-ml-py": "pure Python"}, "cpu-arm64": {"nvidia-ml-py": "pure Python"}})'
    )
    # prelock is the build machine's variant's alone: a cross-built lock is localai-platform-lockfiles'.
    assert {v.name: v.prelock for v in plan.variants} == {"cpu": True, "cpu-arm64": False}


def test_goal_writes_the_arm64_variant_and_localai_resolves_agrees() -> None:
    rule_runner = make_rule_runner()
    rule_runner.write_files(_repo())
    result = _run(rule_runner)
    assert result.exit_code == 0, result.stderr
    assert "localai-rerank-cpu-arm64: cpu-arm64 variant" in result.stdout
    assert "requirements-cpu.txt pinned torch==2.7.1; cpu-arm64 provides torch==2.9.1" in result.stdout
    toml_text = Path(rule_runner.build_root, "pants.toml").read_text()
    assert '"localai-rerank-cpu-arm64" = "lockfiles/localai-rerank-cpu-arm64.lock"' in toml_text
    assert '"localai-rerank-cpu-arm64" = "3rdparty/accelerators/cpu.txt"' in toml_text
    # localai-resolves reads the BUILD line through the macro: it declares the same :cpu-arm64.
    assert rule_runner.run_goal_rule(ResolvesGoal, args=["--check"]).exit_code == 0
