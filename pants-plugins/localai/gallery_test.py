from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml  # pants: no-infer-dep (PyYAML comes with pantsbuild.pants)

from pants.engine.internals.scheduler import ExecutionError

from localai.gallery import LOCALAI_CAPABILITIES, GalleryGoal
from localai.testutil import backend_files, fake_lockfile, make_rule_runner, repo_file, resolve_options

ACCELS = ["cpu", "cuda12", "cuda13", "rocm", "metal"]
LOCKED = ["cpu", "cuda12", "cuda13", "metal"]  # rocm has no lockfile: left out


def _setup(rule_runner, *, built=LOCKED, matrix=None, gallery_yaml=None) -> None:
    lock = fake_lockfile({"torch": ("2.13.0", [("https://example/torch.whl", "ab" * 32)])})
    files = backend_files("diffusers", {a: "" for a in ACCELS})
    files["backends/diffusers/backend.py"] = '"""Image generation with Hugging Face diffusers."""\n'
    if matrix is not None:
        files["3rdparty/accelerators.toml"] = matrix
    if gallery_yaml is not None:
        files["backends/diffusers/gallery.yaml"] = gallery_yaml
    for a in LOCKED:
        files[f"lockfiles/diffusers-{a}.lock"] = lock
    for i, a in enumerate(built):
        files[f"dist/backends/diffusers/{a}/metadata.json"] = json.dumps(
            {
                "artifact_sha256": f"{i:064x}",
                "artifact_size": 1000 + i,
                "lockfile_sha256": hashlib.sha256(lock.encode()).hexdigest(),
            }
        )
    rule_runner.write_files(files)


def _run(rule_runner, *args):
    return rule_runner.run_goal_rule(GalleryGoal, global_args=resolve_options("diffusers", ACCELS), args=list(args))


def test_index_has_localai_fields_and_capabilities_name_concrete_entries() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner, gallery_yaml="license: apache-2.0\ntags: [image-generation]\nurls: [https://github.com/huggingface/diffusers]\n")
    result = _run(rule_runner, "--registry=registry.example/localai")
    assert result.exit_code == 0
    assert "dist/gallery/index.yaml" in result.stdout
    assert "left out backends/diffusers:rocm: no lockfiles/diffusers-rocm.lock" in result.stderr

    index = yaml.safe_load(Path(rule_runner.build_root, "dist/gallery/index.yaml").read_text())
    by_name = {e["name"]: e for e in index}
    assert sorted(by_name) == ["cpu-diffusers", "cuda12-diffusers", "cuda13-diffusers", "diffusers", "metal-diffusers"]
    meta = by_name["diffusers"]
    assert {"name", "alias", "license", "description", "urls", "tags", "capabilities"} <= set(meta)
    assert meta["description"] == "Image generation with Hugging Face diffusers."  # backend.py docstring
    assert meta["license"] == "apache-2.0" and meta["tags"] == ["image-generation"]
    assert meta["capabilities"] == {
        "default": "cpu-diffusers",
        "nvidia": "cuda13-diffusers",
        "nvidia-cuda-12": "cuda12-diffusers",
        "nvidia-cuda-13": "cuda13-diffusers",
        "metal": "metal-diffusers",
        "cpu": "cpu-diffusers",
        "metal-darwin-arm64": "metal-diffusers",
    }
    for key, entry in meta["capabilities"].items():
        assert key in LOCALAI_CAPABILITIES
        assert entry in by_name and "uri" in by_name[entry]
    cpu = by_name["cpu-diffusers"]
    assert cpu["uri"] == "registry.example/localai:latest-cpu-diffusers"
    assert (cpu["sha256"], cpu["size"]) == (f"{0:064x}", 1000)
    assert cpu["alias"] == "diffusers"  # merged from the meta entry, as LocalAI's index does


def test_uri_format_and_extra_capability_from_gallery_yaml() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner, gallery_yaml="capabilities:\n  nvidia-l4t: cuda12\n")
    _run(rule_runner, "--registry=https://dl.example/b/", "--uri-format={registry}/{backend}/{accelerator}/")
    index = yaml.safe_load(Path(rule_runner.build_root, "dist/gallery/index.yaml").read_text())
    by_name = {e["name"]: e for e in index}
    assert by_name["diffusers"]["capabilities"]["nvidia-l4t"] == "cuda12-diffusers"
    assert by_name["cuda12-diffusers"]["uri"] == "https://dl.example/b/diffusers/cuda12/"


def test_capability_key_localai_does_not_know_names_target_and_file() -> None:
    rule_runner = make_rule_runner()
    matrix = repo_file("3rdparty/accelerators.toml").replace('capabilities = ["amd"]', 'capabilities = ["rocm"]')
    assert matrix != repo_file("3rdparty/accelerators.toml")
    _setup(rule_runner, matrix=matrix)
    with pytest.raises(ExecutionError) as e:
        _run(rule_runner)
    msg = str(e.value)
    assert "backends/diffusers:rocm (accelerator 'rocm' in 3rdparty/accelerators.toml)" in msg
    assert "capability key 'rocm' is not one LocalAI knows" in msg
    assert "nvidia-l4t-cuda-13" in msg  # the known list


def test_unknown_capability_in_gallery_yaml() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner, gallery_yaml="capabilities:\n  cuda: cuda12\n")
    with pytest.raises(ExecutionError) as e:
        _run(rule_runner)
    assert "backends/diffusers/gallery.yaml: capability key 'cuda' is not one LocalAI knows" in str(e.value)


def test_missing_artifact_names_target_and_package_command() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner, built=["cpu", "cuda12", "metal"])
    with pytest.raises(ExecutionError) as e:
        _run(rule_runner)
    msg = str(e.value)
    assert "backends/diffusers:cuda13: dist/backends/diffusers/cuda13/metadata.json is missing" in msg
    assert "./pants package backends/diffusers:cuda13" in msg


def test_artifact_built_from_another_lockfile_is_stale() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner)
    rule_runner.write_files({"lockfiles/diffusers-cpu.lock": fake_lockfile({"torch": ("2.14.0", [("u", "cd" * 32)])})})
    with pytest.raises(ExecutionError) as e:
        _run(rule_runner)
    assert "backends/diffusers:cpu: dist/backends/diffusers/cpu/metadata.json is stale" in str(e.value)


def test_unknown_gallery_yaml_field() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner, gallery_yaml="uri: x\n")
    with pytest.raises(ExecutionError) as e:
        _run(rule_runner)
    assert "backends/diffusers/gallery.yaml: unknown field(s) uri" in str(e.value)
