from __future__ import annotations

from pathlib import Path

import pytest
from pants.backend.python.target_types import PythonRequirementResolveField, PythonRequirementsField
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError

from localai.errors import LocalAIError
from localai.model.accelerators import AcceleratorMatrix, AcceleratorMatrixError
from localai.model.git_pins import GitPins, GitPinsError, commit_of
from localai.model.localai_layout import (
    LocalAIConventions,
    LocalAILayoutError,
    direct_references,
    install_order,
    variant_requirements,
)
from localai.model.lockfile import Lockfile
from localai.model.requirements import layer_with_origin
from localai.platforms import PLATFORMS
from localai.testutil import make_rule_runner, repo_file

MATRIX = repo_file("3rdparty/accelerators.toml")


@pytest.fixture(scope="module")
def matrix() -> AcceleratorMatrix:
    return AcceleratorMatrix.parse(MATRIX)


@pytest.fixture(scope="module")
def conventions(matrix) -> LocalAIConventions:
    return LocalAIConventions.parse(MATRIX, matrix)


def test_every_localai_profile_name_is_known(conventions) -> None:
    assert set(conventions.profiles) == {"cpu", "cublas12", "cublas13", "hipblas", "intel", "mps", "l4t12", "l4t13", "vulkan"}
    assert conventions.profile_of("cpu").name == "cpu"
    assert conventions.profile_of("cuda13").name == "cublas13"
    assert conventions.profile_of("rocm").name == "hipblas"


def test_install_order_is_libbackend_sh(conventions) -> None:
    p = conventions.profiles
    assert install_order(p["cpu"]) == (
        "requirements-install.txt",
        "requirements.txt",
        "requirements-cpu.txt",
        "requirements-after.txt",
        "requirements-cpu-after.txt",
    )
    assert install_order(p["cublas13"]) == (
        "requirements-install.txt",
        "requirements.txt",
        "requirements-cublas.txt",
        "requirements-cublas13.txt",
        "requirements-after.txt",
        "requirements-cublas13-after.txt",
    )
    # BUILD_TYPE == BUILD_PROFILE: neither the profile file twice nor a <profile>-after file.
    assert install_order(p["hipblas"]) == (
        "requirements-install.txt",
        "requirements.txt",
        "requirements-hipblas.txt",
        "requirements-after.txt",
    )


def test_later_file_wins_and_cpu_torch_pin_is_replaced_and_recorded(matrix, conventions) -> None:
    files = {
        "requirements.txt": "grpcio==1.85.3\nprotobuf\ntorch==2.5.0\n",
        "requirements-cpu.txt": "transformers\ntorch==2.7.1\n",
        "requirements-after.txt": "protobuf==7.36.2\n",
        "requirements-cublas13.txt": "torch==9.9.9\n",  # another profile's file: not read for cpu
    }
    got = variant_requirements("backends/localai/demo", files, matrix.accelerators["cpu"], conventions)
    assert got.requirements == (
        "grpcio==1.85.3",  # no grpcio-tools added: the stubs come from the grpc-stubs resolve
        "protobuf==7.36.2",
        "torch==2.13.0+cpu",
        "transformers",
    )
    assert got.replacements == ("requirements-cpu.txt pinned torch==2.7.1; cpu provides torch==2.13.0+cpu",)
    assert got.files == (
        "backends/localai/demo/requirements.txt",
        "backends/localai/demo/requirements-cpu.txt",
        "backends/localai/demo/requirements-after.txt",
    )
    assert got.unsatisfied == ()


def test_torchaudio_on_cpu_is_unsatisfied_not_silently_taken_from_pypi(matrix, conventions) -> None:
    files = {"requirements.txt": "grpcio\n", "requirements-cpu.txt": "torch\ntorchaudio==2.7.1\n"}
    got = variant_requirements("backends/localai/tts", files, matrix.accelerators["cpu"], conventions)
    assert not any(r.startswith("torchaudio") for r in got.requirements)
    assert got.unsatisfied == (
        "requirements-cpu.txt needs torchaudio==2.7.1; cpu provides no torchaudio build here "
        "([localai.torch_family.cpu] in 3rdparty/accelerators.toml)",
    )


def test_the_accelerators_own_index_is_honoured(matrix, conventions) -> None:
    files = {"requirements-intel.txt": "--extra-index-url https://download.pytorch.org/whl/xpu\ntorch\n"}
    got = variant_requirements("backends/localai/x", files, matrix.accelerators["intel"], conventions)
    assert "torch==2.13.0+xpu" in got.requirements


def test_another_index_is_refused_naming_file_and_line(matrix, conventions) -> None:
    files = {"requirements-cpu.txt": "torch\n--extra-index-url https://download.pytorch.org/whl/cu121\n"}
    with pytest.raises(LocalAILayoutError) as e:
        variant_requirements("backends/localai/x", files, matrix.accelerators["cpu"], conventions)
    msg = str(e.value)
    assert msg.startswith("backends/localai/x/requirements-cpu.txt line 2: `--extra-index-url https://download.pytorch.org/whl/cu121`")
    assert "cpu accelerator's index isolation" in msg and "Fix:" in msg


def test_a_shared_file_with_a_gpu_index_breaks_the_cpu_variant(matrix, conventions) -> None:
    # requirements.txt is read by every profile: a CUDA index there would reach the cpu resolve.
    files = {"requirements.txt": "-i https://download.pytorch.org/whl/cu130\n", "requirements-cpu.txt": "torch\n"}
    with pytest.raises(LocalAILayoutError, match="backends/localai/x/requirements.txt line 1"):
        variant_requirements("backends/localai/x", files, matrix.accelerators["cpu"], conventions)


def test_unknown_profile_name_names_the_file(matrix, conventions) -> None:
    files = {"requirements-cpu.txt": "torch\n", "requirements-cublas11.txt": "torch\n"}
    with pytest.raises(LocalAILayoutError) as e:
        variant_requirements("backends/localai/x", files, matrix.accelerators["cpu"], conventions)
    assert "backends/localai/x/requirements-cublas11.txt: 'cublas11' is not a LocalAI build profile" in str(e.value)


def test_profile_mapped_to_an_unknown_accelerator_is_refused(matrix) -> None:
    bad = MATRIX.replace('cublas13 = { build_type = "cublas", accelerator = "cuda13" }', 'cublas13 = { build_type = "cublas", accelerator = "cuda99" }')
    with pytest.raises(ValueError, match="unknown accelerator 'cuda99'"):
        LocalAIConventions.parse(bad, matrix)


def _imported(name: str, files: dict[str, str], accels=("cpu",), arm64=()) -> dict[str, str]:
    build = 'localai_sources(name="src", sources=["*.py"])\n'
    for a in accels:
        build += f'localai_requirements(name="requirements-{a}", accelerator="{a}", layout="localai")\n'
    for a in arm64:
        build += (
            f'localai_requirements(name="requirements-{a}-arm64", accelerator="{a}", platform="linux_aarch64", '
            'layout="localai")\n'
        )
    return {
        "3rdparty/accelerators.toml": MATRIX,
        f"backends/localai/{name}/BUILD": build,
        f"backends/localai/{name}/backend.py": "",
        **{f"backends/localai/{name}/{k}": v for k, v in files.items()},
    }


def test_generated_requirements_of_an_imported_folder_use_the_policy() -> None:
    rule_runner = make_rule_runner()
    rule_runner.write_files(
        _imported("demo", {"requirements.txt": "grpcio==1.85.3\n", "requirements-cpu.txt": "torch==2.7.1\n"})
    )
    rule_runner.set_options(
        [
            "--python-resolves={'localai-demo-cpu': 'lockfiles/localai-demo-cpu.lock'}",
            "--python-resolves-to-constraints-file={'localai-demo-cpu': '3rdparty/accelerators/cpu.txt'}",
        ]
    )
    torch = rule_runner.get_target(
        Address("backends/localai/demo", target_name="requirements-cpu", generated_name="torch")
    )
    assert str(torch[PythonRequirementsField].value[0]) == "torch==2.13.0+cpu"
    assert torch[PythonRequirementResolveField].value == "localai-demo-cpu"
    with pytest.raises(ExecutionError, match="grpcio-tools"):  # not added to the folder's resolve
        rule_runner.get_target(Address("backends/localai/demo", target_name="requirements-cpu", generated_name="grpcio-tools"))


def test_a_folders_own_grpcio_tools_line_is_kept(matrix, conventions) -> None:
    # LocalAI's faster-whisper lists grpcio-tools itself: it is locked as LocalAI installs it.
    files = {"requirements.txt": "grpcio==1.71.0\nprotobuf\ngrpcio-tools\n"}
    got = variant_requirements("backends/localai/fw", files, matrix.accelerators["cpu"], conventions)
    assert got.requirements == ("grpcio==1.71.0", "grpcio-tools", "protobuf")


def test_generated_requirements_fail_naming_the_file_with_a_foreign_index() -> None:
    rule_runner = make_rule_runner()
    rule_runner.write_files(
        _imported("demo", {"requirements-cpu.txt": "--extra-index-url https://download.pytorch.org/whl/rocm6.4\ntorch\n"})
    )
    rule_runner.set_options(
        [
            "--python-resolves={'localai-demo-cpu': 'lockfiles/localai-demo-cpu.lock'}",
            "--python-resolves-to-constraints-file={'localai-demo-cpu': '3rdparty/accelerators/cpu.txt'}",
        ]
    )
    with pytest.raises(ExecutionError) as e:
        rule_runner.get_target(Address("backends/localai/demo", target_name="requirements-cpu", generated_name="torch"))
    assert "backends/localai/demo:requirements-cpu: backends/localai/demo/requirements-cpu.txt line 1" in str(e.value)


def test_another_pytorch_build_of_the_same_accelerator_is_dropped_and_recorded(matrix, conventions) -> None:
    # LocalAI's cublas12 files name cu121/cu124/cu128; the cuda12 policy supplies torch from cu126.
    files = {"requirements-cublas12.txt": "--extra-index-url https://download.pytorch.org/whl/cu121\ntorch==2.4.1\n"}
    got = variant_requirements("backends/localai/x", files, matrix.accelerators["cuda12"], conventions)
    assert "torch==2.13.0+cu126" in got.requirements
    assert got.replacements == (
        "requirements-cublas12.txt pinned torch==2.4.1; cuda12 provides torch==2.13.0+cu126",
        "requirements-cublas12.txt names index https://download.pytorch.org/whl/cu121; cuda12 takes its torch "
        "family from https://download.pytorch.org/whl/cu126",
    )


def test_an_alias_of_one_accelerator_is_refused_in_another(matrix, conventions) -> None:
    files = {"requirements-hipblas.txt": "--extra-index-url https://download.pytorch.org/whl/nightly/rocm7.0\ntorch\n"}
    with pytest.raises(LocalAILayoutError, match="requirements-hipblas.txt line 1"):
        variant_requirements("backends/localai/x", files, matrix.accelerators["rocm"], conventions)
    files = {"requirements-cpu.txt": "--extra-index-url https://download.pytorch.org/whl/cu130\ntorch\n"}
    with pytest.raises(LocalAILayoutError, match="would break the cpu accelerator's index isolation"):
        variant_requirements("backends/localai/x", files, matrix.accelerators["cpu"], conventions)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("git+https://github.com/xhinker/sd_embed", "sd_embed @ git+https://github.com/xhinker/sd_embed"),
        ("git+https://github.com/Blaizzy/mlx-vlm@v0.4.4", "mlx-vlm @ git+https://github.com/Blaizzy/mlx-vlm@v0.4.4"),
        ("git+https://example.org/x/repo.git@abc#egg=real_name", "real_name @ git+https://example.org/x/repo.git@abc#egg=real_name"),
        (
            "https://github.com/KittenML/KittenTTS/releases/download/0.1/kittentts-0.1.0-py3-none-any.whl",
            "kittentts @ https://github.com/KittenML/KittenTTS/releases/download/0.1/kittentts-0.1.0-py3-none-any.whl",
        ),
        ("http://127.0.0.1:8000/tiny_pkg-1.2.tar.gz", "tiny_pkg @ http://127.0.0.1:8000/tiny_pkg-1.2.tar.gz"),
        (
            "https://h/flash_attn-2.8.3+cu12torch2.7-cp310-cp310-linux_x86_64.whl ; platform_machine == 'x86_64'",
            "flash_attn @ https://h/flash_attn-2.8.3+cu12torch2.7-cp310-cp310-linux_x86_64.whl ; platform_machine == 'x86_64'",
        ),
    ],
)
def test_bare_url_lines_become_direct_references_named_from_the_url(line, expected) -> None:
    refs = direct_references("d/requirements-cpu.txt", f"torch\n{line}\n")
    assert refs.content == f"torch\n{expected}\n"
    assert refs.notes == (f"requirements-cpu.txt line 2: `{line.split(' ;')[0]}` read as `{expected}`",)
    # What is read is PEP 508: the layering's parser takes it, as a direct reference.
    ((_, req),) = layer_with_origin([("d/requirements-cpu.txt", expected + "\n")]).values()
    assert req.url and req.url == line.split(" ;")[0]


def test_a_url_naming_no_project_is_refused_naming_file_and_line() -> None:
    with pytest.raises(LocalAILayoutError, match=r"d/requirements.txt line 1: `https://h/download\?id=3` names no project"):
        direct_references("d/requirements.txt", "https://h/download?id=3\n")


def test_pep508_direct_references_and_their_markers_are_kept(matrix, conventions) -> None:
    files = {
        "requirements.txt": "grpcio==1.85.3\n",
        "requirements-cpu.txt": "vllm @ https://h/vllm-0.27.1+cpu-cp38-abi3-manylinux_2_35_x86_64.whl ; platform_machine == 'x86_64'\n"
        "git+https://github.com/xhinker/sd_embed\n",
    }
    layered = variant_requirements("d", files, matrix.accelerators["cpu"], conventions)
    vllm = next(r for r in layered.requirements if r.startswith("vllm"))
    assert "https://h/vllm-0.27.1+cpu-cp38-abi3-manylinux_2_35_x86_64.whl" in vllm and 'platform_machine == "x86_64"' in vllm, vllm
    assert any(r.startswith("sd_embed") and "git+https://github.com/xhinker/sd_embed" in r for r in layered.requirements), layered.requirements
    sd_embed = "git+https://github.com/xhinker/sd_embed"
    assert f"requirements-cpu.txt line 2: `{sd_embed}` read as `sd_embed @ {sd_embed}`" in layered.replacements


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_git_urls_are_read_at_their_pinned_commit_markers_kept() -> None:
    pins = GitPins.parse(
        '[pins]\n"git+https://github.com/Blaizzy/mlx-vlm@v0.4.4" = "%s"\n'
        '"git+file:///srv/repo" = "%s"\n' % (COMMIT, COMMIT)
    )
    content = (
        "git+https://github.com/Blaizzy/mlx-vlm@v0.4.4\n"
        "tiny @ git+file:///srv/repo ; python_version >= '3.8'\n"
        f"other @ git+https://h/o/other@{COMMIT}#subdirectory=py\n"
    )
    refs = direct_references("d/requirements-cpu.txt", content, pins)
    assert refs.content.splitlines() == [
        f"mlx-vlm @ git+https://github.com/Blaizzy/mlx-vlm@{COMMIT}",
        # pip 20.3.4 refuses git+file:/// (no host): the pinned URL names localhost.
        f"tiny @ git+file://localhost/srv/repo@{COMMIT} ; python_version >= '3.8'",
        # Already a commit: its own pin, unchanged.
        f"other @ git+https://h/o/other@{COMMIT}#subdirectory=py",
    ]
    assert refs.unpinned == ()
    assert refs.notes[0] == (
        f"requirements-cpu.txt line 1: `git+https://github.com/Blaizzy/mlx-vlm@v0.4.4` read as "
        f"`mlx-vlm @ git+https://github.com/Blaizzy/mlx-vlm@{COMMIT}`"
    )
    ((_, req),) = layer_with_origin([("d/r.txt", refs.content.splitlines()[1] + "\n")]).values()
    assert req.url == f"git+file://localhost/srv/repo@{COMMIT}" and 'python_version >= "3.8"' in str(req)


def test_an_unpinned_git_url_makes_the_variant_not_lockable_naming_it(matrix, conventions) -> None:
    files = {"requirements.txt": "grpcio==1.85.3\n", "requirements-cpu.txt": "git+https://github.com/Blaizzy/mlx-audio\n"}
    layered = variant_requirements("d", files, matrix.accelerators["cpu"], conventions)
    assert layered.unsatisfied == (
        "requirements-cpu.txt line 1: `git+https://github.com/Blaizzy/mlx-audio` has no commit pinned in "
        "3rdparty/localai-git-pins.toml (git could not resolve its ref when the folder was imported; re-run "
        "`./pants localai-import` where the host is reachable)",
    )
    pinned = variant_requirements(
        "d", files, matrix.accelerators["cpu"], conventions,
        GitPins.parse(f'[pins]\n"git+https://github.com/Blaizzy/mlx-audio" = "{COMMIT}"\n'),
    )
    assert pinned.unsatisfied == ()
    assert f"mlx-audio@ git+https://github.com/Blaizzy/mlx-audio@{COMMIT}" in pinned.requirements, pinned.requirements


def test_git_pins_file_round_trips_and_refuses_what_is_not_a_commit() -> None:
    pins = GitPins.parse(f'[pins]\n"git+https://h/b" = "{COMMIT}"\n"git+https://h/a@v1" = "{COMMIT}"\n')
    assert GitPins.parse(pins.render()) == pins
    assert pins.render().index("h/a@v1") < pins.render().index("h/b")  # sorted: re-runs write the same bytes
    with pytest.raises(GitPinsError, match=r"3rdparty/localai-git-pins.toml: git\+https://h/a: not a 40-hex commit. Fix: delete"):
        GitPins.parse('[pins]\n"git+https://h/a" = "main"\n')


def test_ls_remote_output_names_a_tags_commit_not_the_tag_object() -> None:
    tag_object, commit = "a" * 40, "b" * 40
    assert commit_of(f"{tag_object}\trefs/tags/v1\n{commit}\trefs/tags/v1^{{}}\n", "v1") == commit
    assert commit_of(f"{commit}\tHEAD\n{tag_object}\trefs/heads/main\n", None) == commit
    assert commit_of("", "v9") is None


OVERRIDES = """
[localai.overrides.tts]
no_deps = ["Chatterbox_TTS"]

[localai.overrides.omni]
out_of_scope = "installs vllm with --torch-backend=auto"
accelerators = ["cuda13"]
"""


def test_install_sh_overrides_make_those_variants_not_lockable_with_the_reason(matrix) -> None:
    conventions = LocalAIConventions.parse(MATRIX + OVERRIDES, matrix)
    files = {"requirements.txt": "grpcio==1.85.3\n", "requirements-cpu.txt": "numpy\n", "requirements-cublas13.txt": "numpy\n"}
    tts = variant_requirements("backends/localai/tts", files, matrix.accelerators["cpu"], conventions)
    assert tts.unsatisfied == (
        "tts/install.sh installs chatterbox-tts with --no-deps, which a lock cannot honour (it resolves every "
        "requirement's dependencies) ([localai.overrides.tts] in 3rdparty/accelerators.toml)",
    )
    # Scoped to cuda13: the cpu variant of the same folder stays lockable.
    assert variant_requirements("backends/localai/omni", files, matrix.accelerators["cpu"], conventions).unsatisfied == ()
    omni = variant_requirements("backends/localai/omni", files, matrix.accelerators["cuda13"], conventions)
    assert omni.unsatisfied == (
        "omni/install.sh: installs vllm with --torch-backend=auto ([localai.overrides.omni] in 3rdparty/accelerators.toml)",
    )


@pytest.mark.parametrize(
    "table, message",
    [
        (
            '[localai.overrides.x]\nno_dep = ["a"]\n',
            r"\[localai.overrides.x\]: unknown key\(s\) no_dep. Fix: use accelerators, exempt, extra_indexes, no_deps, "
            r"not_lockable, out_of_scope, prelock, profiles",
        ),
        (
            '[localai.overrides.x]\nextra_indexes = ["https://a.invalid/simple"]\n',
            r"\[localai.overrides.x\]: extra_indexes must map an accelerator to the index URLs",
        ),
        ('[localai.overrides.x]\nno_deps = "a"\n', r"\[localai.overrides.x\]: no_deps must be a list of project names"),
        ('[localai.overrides.x]\nout_of_scope = " "\n', r"\[localai.overrides.x\]: out_of_scope must say why"),
        (
            '[localai.overrides.x]\nnot_lockable = { cpu = "" }\n',
            r"\[localai.overrides.x\]: not_lockable must map a variant \(an accelerator, or `<accelerator>-arm64`\) to why",
        ),
        ('[localai.overrides.x]\nprofiles = ["cpu2"]\n', r"\[localai.overrides.x\]: profiles must list LocalAI profile names \(.*cpu.*\)"),
        ('[localai.overrides.x]\nexempt = { cpu = ["nvidia-ml-py"] }\n', r"\[localai.overrides.x\]: exempt must map an accelerator to \{project = why\}"),
        ('[localai.overrides.x]\nexempt = { cpu = { nvidia-ml-py = " " } }\n', r"\[localai.overrides.x\]: exempt must map an accelerator to \{project = why\}"),
        ('[localai.overrides.x]\nprelock = true\n', r"\[localai.overrides.x\]: prelock must list the accelerators.*prelock = \[\"cpu\"\]"),
    ],
)
def test_a_malformed_override_is_refused_naming_the_table_and_the_fix(matrix, table, message) -> None:
    with pytest.raises(LocalAILayoutError, match=message):
        LocalAIConventions.parse(MATRIX + "\n" + table, matrix)


def test_an_extra_index_for_an_unknown_accelerator_is_refused_naming_the_table(matrix) -> None:
    with pytest.raises(LocalAIError, match=r"\[localai.overrides.x\] extra_indexes: unknown accelerator 'cuda14'"):
        LocalAIConventions.parse(MATRIX + '\n[localai.overrides.x]\nextra_indexes = { cuda14 = ["https://a.invalid/simple"] }\n', matrix)


def test_the_repository_overrides_name_localai_folders_install_sh_steps(conventions) -> None:
    assert conventions.overrides["chatterbox"].no_deps == ("chatterbox-tts",)
    assert "--no-build-isolation" in conventions.overrides["fish-speech"].out_of_scope
    assert conventions.overrides["vllm-omni"].accelerators == ("cuda13", "rocm")


def test_prelock_lists_known_accelerators(matrix) -> None:
    table = '[localai.overrides.x]\nprelock = ["cpu"]\n'
    assert LocalAIConventions.parse(MATRIX + "\n" + table, matrix).overrides["x"].prelock == ("cpu",)
    with pytest.raises(AcceleratorMatrixError, match=r"\[localai.overrides.x\] prelock: unknown accelerator 'gpu9'"):
        LocalAIConventions.parse(MATRIX + "\n" + table.replace("cpu", "gpu9"), matrix)


def test_a_variant_measured_not_lockable_says_why_and_the_folders_other_variants_stay_lockable(matrix) -> None:
    table = '[localai.overrides.tts]\nnot_lockable = { cpu = "pesq 0.0.4 does not build" }\naccelerators = ["cuda13"]\nno_deps = ["x"]\n'
    conventions = LocalAIConventions.parse(MATRIX + "\n" + table, matrix)
    files = {"requirements.txt": "grpcio==1.85.3\n", "requirements-cpu.txt": "numpy\n", "requirements-cublas12.txt": "numpy\n"}
    cpu = variant_requirements("backends/localai/tts", files, matrix.accelerators["cpu"], conventions)
    # Keyed by accelerator: `accelerators` (which scopes no_deps to cuda13) does not hide it.
    assert cpu.unsatisfied == ("pesq 0.0.4 does not build ([localai.overrides.tts] in 3rdparty/accelerators.toml)",)
    assert variant_requirements("backends/localai/tts", files, matrix.accelerators["cuda12"], conventions).unsatisfied == ()


def test_an_exemption_names_forbidden_projects_of_known_accelerators_with_why(matrix) -> None:
    table = '[localai.overrides.x]\nexempt = { cpu = { "NVIDIA_ML_PY" = " pure Python " } }\n'
    exempt = LocalAIConventions.parse(MATRIX + "\n" + table, matrix).overrides["x"].exempt
    assert {a: dict(p) for a, p in exempt.items()} == {"cpu": {"nvidia-ml-py": "pure Python"}}
    # An exemption of what the accelerator does not forbid would be dead data: refused.
    with pytest.raises(LocalAILayoutError, match=r"\[localai.overrides.x\]: exempt names numpy for cpu, whose `forbidden` list does not name it. Fix: drop it"):
        LocalAIConventions.parse(MATRIX + "\n" + table.replace("NVIDIA_ML_PY", "numpy"), matrix)
    with pytest.raises(AcceleratorMatrixError, match=r"\[localai.overrides.x\] exempt: unknown accelerator 'gpu9'"):
        LocalAIConventions.parse(MATRIX + "\n" + table.replace("cpu", "gpu9"), matrix)


ARM64 = PLATFORMS["linux_aarch64"]
TORCH_FAMILY = {"requirements.txt": "grpcio==1.85.3\n", "requirements-cpu.txt": "torch==2.7.1\ntorchaudio==2.7.1\ntorchvision\n"}


def test_cpu_arm64_has_a_pin_policy_of_its_own_with_pypis_aarch64_cpu_builds(matrix, conventions) -> None:
    # The same files as the x86_64 cpu variant (LocalAI's cpu profile), another torch family.
    arm64 = variant_requirements("backends/localai/tts", TORCH_FAMILY, matrix.accelerators["cpu"], conventions, platform=ARM64)
    assert arm64.requirements == ("grpcio==1.85.3", "torch==2.9.1", "torchaudio==2.9.1", "torchvision==0.24.1")
    assert arm64.unsatisfied == ()
    assert arm64.replacements == (
        "requirements-cpu.txt pinned torch==2.7.1; cpu-arm64 provides torch==2.9.1",
        "requirements-cpu.txt pinned torchaudio==2.7.1; cpu-arm64 provides torchaudio==2.9.1",
        "requirements-cpu.txt asks for torchvision; cpu-arm64 provides torchvision==0.24.1",
    )
    # On x86_64 PyPI's torchaudio/torchvision are CUDA builds: that variant stays not lockable.
    x86 = variant_requirements("backends/localai/tts", TORCH_FAMILY, matrix.accelerators["cpu"], conventions)
    assert [u.split(";")[0] for u in x86.unsatisfied] == [
        "requirements-cpu.txt needs torchaudio==2.7.1",
        "requirements-cpu.txt needs torchvision",
    ]


def test_arm64_variants_are_declared_where_an_accelerator_has_an_arm64_pin_policy(matrix, conventions) -> None:
    assert conventions.cross_platforms_of(matrix.accelerators["cpu"]) == (ARM64,)
    # cuda13 lists linux_aarch64 but has no [localai.torch_family.cuda13-arm64]: no imported arm64 variant.
    assert conventions.cross_platforms_of(matrix.accelerators["cuda13"]) == ()
    with pytest.raises(LocalAILayoutError) as e:
        variant_requirements("backends/localai/x", {"requirements-cublas13.txt": "torch\n"}, matrix.accelerators["cuda13"],
                             conventions, platform=ARM64)
    assert str(e.value).startswith(
        "backends/localai/x: the cuda13-arm64 variant has no pin policy: [localai.torch_family.cuda13-arm64] is missing"
    )
    assert "Fix: add that table" in str(e.value)


def test_an_arm64_pin_policy_for_a_platform_the_accelerator_does_not_list_is_refused(matrix) -> None:
    with pytest.raises(LocalAILayoutError) as e:
        LocalAIConventions.parse(MATRIX + '\n[localai.torch_family.rocm-arm64]\ntorch = "torch==2.9.1"\n', matrix)
    assert str(e.value) == (
        "3rdparty/accelerators.toml [localai.torch_family.rocm-arm64]: 'rocm-arm64' names rocm on linux_aarch64, which "
        "the rocm accelerator does not list (`platforms` of [rocm] in 3rdparty/accelerators.toml). Fix: add the "
        "platform there, or drop 'rocm-arm64'."
    )


def test_not_lockable_is_keyed_by_variant_and_install_sh_steps_hold_on_every_platform(matrix) -> None:
    table = (
        '[localai.overrides.tts]\nnot_lockable = { "cpu-arm64" = "no aarch64 wheel of x" }\n'
        '[localai.overrides.cb]\nno_deps = ["chatterbox-tts"]\n'
    )
    conventions = LocalAIConventions.parse(MATRIX + "\n" + table, matrix)
    files = {"requirements.txt": "grpcio==1.85.3\n", "requirements-cpu.txt": "numpy\n"}
    cpu = matrix.accelerators["cpu"]
    assert variant_requirements("backends/localai/tts", files, cpu, conventions).unsatisfied == ()
    assert variant_requirements("backends/localai/tts", files, cpu, conventions, platform=ARM64).unsatisfied == (
        "no aarch64 wheel of x ([localai.overrides.tts] in 3rdparty/accelerators.toml)",
    )
    both = [variant_requirements("backends/localai/cb", files, cpu, conventions, platform=p).unsatisfied
            for p in (PLATFORMS["linux_x86_64"], ARM64)]
    assert both[0] == both[1] and "installs chatterbox-tts with --no-deps" in both[0][0]


def test_our_backends_arm64_locks_hold_the_torch_family_the_arm64_policy_pins(conventions) -> None:
    """One owner of "PyPI's aarch64 CPU torch family": [localai.torch_family.cpu-arm64]. Our own
    backends pin it in requirements-cpu-arm64.txt; their committed locks must hold those versions."""
    policy = {name: req.split("==")[1] for name, req in conventions.torch_family["cpu-arm64"].items()}
    assert policy == {"torch": "2.9.1", "torchvision": "0.24.1", "torchaudio": "2.9.1"}
    checked = 0
    for path in sorted(Path("lockfiles").glob("*-cpu-arm64.lock")):
        for name, version in Lockfile.of(str(path), path.read_bytes()).versions():
            if name in policy:
                assert (str(path), name, version) == (str(path), name, policy[name])
                checked += 1
    assert checked >= 8  # bark, diffusers, kokoro, rerankers, rfdetr (torch, torchvision), silero-vad, transformers


def test_generated_requirements_of_an_imported_folders_arm64_variant_use_its_policy() -> None:
    rule_runner = make_rule_runner()
    rule_runner.write_files(_imported("demo", TORCH_FAMILY, arm64=("cpu",)))
    rule_runner.set_options(
        [
            "--python-resolves={'localai-demo-cpu': 'lockfiles/localai-demo-cpu.lock', "
            "'localai-demo-cpu-arm64': 'lockfiles/localai-demo-cpu-arm64.lock'}",
            "--python-resolves-to-constraints-file={'localai-demo-cpu': '3rdparty/accelerators/cpu.txt', "
            "'localai-demo-cpu-arm64': '3rdparty/accelerators/cpu.txt'}",
        ]
    )
    for name, expected in (("torch", "torch==2.9.1"), ("torchaudio", "torchaudio==2.9.1"), ("torchvision", "torchvision==0.24.1")):
        tgt = rule_runner.get_target(Address("backends/localai/demo", target_name="requirements-cpu-arm64", generated_name=name))
        assert str(tgt[PythonRequirementsField].value[0]) == expected
        assert tgt[PythonRequirementResolveField].value == "localai-demo-cpu-arm64"
    x86_torch = rule_runner.get_target(Address("backends/localai/demo", target_name="requirements-cpu", generated_name="torch"))
    assert str(x86_torch[PythonRequirementsField].value[0]) == "torch==2.13.0+cpu"


def test_the_repository_says_why_localais_transformers_is_no_cpu_artifact_on_either_platform(matrix, conventions) -> None:
    files = {"requirements.txt": "grpcio==1.85.3\n", "requirements-cpu.txt": "torch==2.7.1\nbitsandbytes\n"}
    cpu = matrix.accelerators["cpu"]
    x86, arm64 = (variant_requirements("backends/localai/transformers", files, cpu, conventions, platform=p).unsatisfied
                  for p in (PLATFORMS["linux_x86_64"], ARM64))
    assert len(x86) == 1 and "whose x86_64 wheel (0.50.2)" in x86[0]
    assert len(arm64) == 1 and "whose aarch64 wheel (0.50.2, manylinux_2_24_aarch64)" in arm64[0]
