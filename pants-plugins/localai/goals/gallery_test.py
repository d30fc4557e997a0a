from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest
import yaml  # pants: no-infer-dep (PyYAML comes with pantsbuild.pants)
from pants.engine.internals.scheduler import ExecutionError

from localai.goals.gallery import LOCALAI_CAPABILITIES, GalleryGoal
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
        files[f"dist/backends/diffusers/{a}/build-record.json"] = json.dumps(
            {"artifact_sha256": "ff" * 32, "lockfile_sha256": hashlib.sha256(lock.encode()).hexdigest()}
        )
        files[f"dist/images/diffusers/{a}/image.json"] = json.dumps({"manifest_digest": f"sha256:{i:064x}"})
    rule_runner.write_files(files)


def _run(rule_runner, *args, targets=("backends/diffusers::",), registry="--localai-oci-registry=registry.example"):
    return rule_runner.run_goal_rule(
        GalleryGoal, global_args=[*resolve_options("diffusers", ACCELS), registry], args=[*args, *targets]
    )


def test_index_has_localai_fields_and_capabilities_name_concrete_entries() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner, gallery_yaml="license: apache-2.0\ntags: [image-generation]\nurls: [https://github.com/huggingface/diffusers]\n")
    result = _run(rule_runner, "--localai-oci-repository=localai", "--localai-oci-mirrors=['m1.example/a', 'm2.example/b/']")
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
    digest = f"sha256:{0:064x}"
    assert cpu["uri"] == f"registry.example/localai@{digest}"  # by digest, never a mutable tag
    assert cpu["mirrors"] == [f"m1.example/a@{digest}", f"m2.example/b@{digest}"]
    assert "sha256" not in cpu  # LocalAI checks sha256 only for plain downloads, not OCI images
    assert cpu["alias"] == "diffusers"  # merged from the meta entry, as LocalAI's index does
    assert by_name["cuda13-diffusers"]["uri"] == f"registry.example/localai@sha256:{2:064x}"


def test_covers_only_the_targets_given() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner, built=["cpu"])  # cuda12/cuda13/metal not built: not asked for either
    result = _run(rule_runner, targets=("backends/diffusers:cpu",))
    assert result.exit_code == 0
    index = yaml.safe_load(Path(rule_runner.build_root, "dist/gallery/index.yaml").read_text())
    assert sorted(e["name"] for e in index) == ["cpu-diffusers", "diffusers"]
    assert index[0]["capabilities"] == {"default": "cpu-diffusers", "cpu": "cpu-diffusers"}


def test_no_variant_given_names_the_command() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner)
    with pytest.raises(ExecutionError) as e:
        _run(rule_runner, targets=("backends/diffusers:rocm",))
    msg = str(e.value)
    assert "was given no backend variant with a lockfile" in msg and "./pants localai-gallery backends::" in msg
    assert "backends/diffusers:rocm: no lockfiles/diffusers-rocm.lock" in msg


def test_no_registry_says_which_option() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner)
    with pytest.raises(ExecutionError) as e:
        _run(rule_runner, registry="--localai-oci-registry=")
    assert "--localai-oci-registry=<host[:port]>" in str(e.value) and "localai-bundle" in str(e.value)


def test_bundle_points_at_ocifile_tarballs_it_writes_from_the_layouts() -> None:
    from localai.goals.bundle import BundleGoal
    from localai.oci.scripts.layout import read_layout, write_image_files

    rule_runner = make_rule_runner()
    _setup(rule_runner, built=["cpu", "metal"])
    images = {}
    for a in ("cpu", "metal"):  # real layouts (no layer) whose manifests image.json names
        where = Path(rule_runner.build_root, f"dist/images/diffusers/{a}")
        image = write_image_files(where / "layout", [], ref_name=f"{a}-diffusers", annotations={"io.localai.accelerator": a})
        (where / "image.json").write_text(json.dumps({"manifest_digest": image.manifest.digest}))
        images[a] = image.manifest.digest
    result = rule_runner.run_goal_rule(
        BundleGoal,
        global_args=resolve_options("diffusers", ACCELS),
        args=["--localai-bundle-location=/opt/localai-bundle", "backends/diffusers:cpu", "backends/diffusers:metal"],
    )
    assert result.exit_code == 0
    out = Path(rule_runner.build_root, "dist/bundle")
    index = yaml.safe_load((out / "index.yaml").read_text())
    by_name = {e["name"]: e for e in index}
    assert by_name["cpu-diffusers"]["uri"] == "ocifile:///opt/localai-bundle/images/cpu-diffusers.oci.tar"
    assert sorted(p.name for p in (out / "images").iterdir()) == ["cpu-diffusers.oci.tar", "metal-diffusers.oci.tar"]
    for a, digest in images.items():  # each tarball is its layout: index.json names the manifest image.json names
        unpacked = Path(rule_runner.build_root, f"unpacked-{a}")
        with tarfile.open(out / f"images/{a}-diffusers.oci.tar") as tar:
            assert {"index.json", "oci-layout", "manifest.json", f"blobs/sha256/{digest.split(':')[1]}"} <= set(tar.getnames())
            tar.extractall(unpacked)
        assert read_layout(unpacked)[1] == digest


def test_bundle_refuses_a_layout_that_is_not_the_image_json_s() -> None:
    from localai.goals.bundle import BundleGoal
    from localai.oci.scripts.layout import write_image_files

    rule_runner = make_rule_runner()
    _setup(rule_runner, built=["cpu"])
    write_image_files(Path(rule_runner.build_root, "dist/images/diffusers/cpu/layout"), [], ref_name="cpu-diffusers", annotations={})
    with pytest.raises(ExecutionError) as e:  # image.json still names the setup's fake digest
        rule_runner.run_goal_rule(BundleGoal, global_args=resolve_options("diffusers", ACCELS), args=["backends/diffusers:cpu"])
    assert "dist/images/diffusers/cpu/layout holds manifest sha256:" in str(e.value) and "./pants package backends/diffusers:cpu" in str(e.value)


def test_extra_capability_from_gallery_yaml() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner, gallery_yaml="capabilities:\n  nvidia-l4t: cuda12\n")
    _run(rule_runner)
    index = yaml.safe_load(Path(rule_runner.build_root, "dist/gallery/index.yaml").read_text())
    by_name = {e["name"]: e for e in index}
    assert by_name["diffusers"]["capabilities"]["nvidia-l4t"] == "cuda12-diffusers"


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
    assert "backends/diffusers:cuda13: dist/backends/diffusers/cuda13/build-record.json is missing" in msg
    assert "./pants package backends/diffusers:cuda13" in msg


def test_artifact_built_from_another_lockfile_is_stale() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner)
    rule_runner.write_files({"lockfiles/diffusers-cpu.lock": fake_lockfile({"torch": ("2.14.0", [("u", "cd" * 32)])})})
    with pytest.raises(ExecutionError) as e:
        _run(rule_runner)
    assert "backends/diffusers:cpu: dist/backends/diffusers/cpu/build-record.json is stale" in str(e.value)


def test_unknown_gallery_yaml_field() -> None:
    rule_runner = make_rule_runner()
    _setup(rule_runner, gallery_yaml="uri: x\n")
    with pytest.raises(ExecutionError) as e:
        _run(rule_runner)
    assert "backends/diffusers/gallery.yaml: unknown field(s) uri" in str(e.value)


def _setup_with_arm64(rule_runner, index_amd64: str) -> str:
    """diffusers with `arm64=["cpu"]`, both images built, and their index naming `index_amd64` for linux/amd64."""
    _setup(rule_runner)
    lock = Path(rule_runner.build_root, "lockfiles/diffusers-cpu.lock").read_text()
    arm64_image = f"sha256:{'a' * 64}"
    index_digest = f"sha256:{'1' * 64}"
    rule_runner.write_files(
        {
            "backends/diffusers/BUILD": f"localai_backend(accelerators={ACCELS!r}, arm64=['cpu'])\n",
            "lockfiles/diffusers-cpu-arm64.lock": lock,
            "dist/backends/diffusers/cpu-arm64/build-record.json": json.dumps(
                {"lockfile_sha256": hashlib.sha256(lock.encode()).hexdigest()}
            ),
            "dist/images/diffusers/cpu-arm64/image.json": json.dumps({"manifest_digest": arm64_image}),
            "dist/images/diffusers/cpu-index/image.json": json.dumps(
                {"manifest_digest": index_digest, "manifests": {"linux/amd64": index_amd64, "linux/arm64": arm64_image}}
            ),
        }
    )
    return index_digest


def _run_arm64(rule_runner, targets):
    return rule_runner.run_goal_rule(
        GalleryGoal,
        global_args=[
            *resolve_options("diffusers", [*ACCELS, "cpu-arm64"], matrix_pip={"cpu-arm64": "3rdparty/accelerators/cpu.txt"}),
            "--localai-oci-registry=registry.example",
        ],
        args=list(targets),
    )


def test_a_variant_with_an_arm64_sibling_is_named_by_their_image_index() -> None:
    rule_runner = make_rule_runner()
    index_digest = _setup_with_arm64(rule_runner, index_amd64=f"sha256:{0:064x}")  # cpu's image, as built
    result = _run_arm64(rule_runner, ["backends/diffusers:cpu", "backends/diffusers:cpu-arm64"])
    assert result.exit_code == 0 and "cpu-arm64" not in result.stderr
    index = yaml.safe_load(Path(rule_runner.build_root, "dist/gallery/index.yaml").read_text())
    by_name = {e["name"]: e for e in index}
    assert sorted(by_name) == ["cpu-diffusers", "diffusers"]  # one entry: the platform is the index's business
    assert by_name["cpu-diffusers"]["uri"] == f"registry.example/local-ai-backends@{index_digest}"

    # Without its build machine's variant, the arm64 one has no entry, and says why.
    with pytest.raises(ExecutionError) as e:
        _run_arm64(rule_runner, ["backends/diffusers:cpu-arm64"])
    assert "backends/diffusers:cpu-arm64: named through its image index with the build machine's variant" in str(e.value)


def test_an_index_of_other_images_than_those_built_is_refused() -> None:
    rule_runner = make_rule_runner()
    _setup_with_arm64(rule_runner, index_amd64=f"sha256:{'e' * 64}")  # an older cpu image
    with pytest.raises(ExecutionError) as e:
        _run_arm64(rule_runner, ["backends/diffusers:cpu", "backends/diffusers:cpu-arm64"])
    msg = str(e.value)
    assert "backends/diffusers:cpu-index: dist/images/diffusers/cpu-index/image.json names" in msg
    assert "Fix: run `./pants package backends/diffusers:cpu-index`" in msg
