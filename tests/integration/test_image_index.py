"""backends/rerankers:cpu-index, the OCI image index of rerankers:cpu and rerankers:cpu-arm64,
read by skopeo (an independent OCI client): it names exactly the two images `pants package`
built, each with the platform its config states, and a client asking for linux/amd64 or
linux/arm64 (`--override-arch`, what LocalAI's image pull does with its own platform) gets that
platform's image. Pushed to a real registry by skopeo, LocalAI's installer (the fixture) given the
index digest installs the folder of the platform it asks for."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.backend_process import dist_path, tree_sha256
from tests.integration.localai_installer import install
from tests.integration.registry import RegistryServer, debian_tool

INDEX = Path("images/rerankers/cpu-index")
IMAGES = {"amd64": Path("images/rerankers/cpu"), "arm64": Path("images/rerankers/cpu-arm64")}


def skopeo(*args: str) -> dict:
    run = subprocess.run([debian_tool("skopeo"), *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_index_names_both_platform_images_by_digest() -> None:
    raw = skopeo("inspect", "--raw", f"oci:{INDEX / 'layout'}")
    assert raw["mediaType"] == "application/vnd.oci.image.index.v1+json"
    listed = {m["platform"]["architecture"]: (m["platform"]["os"], m["digest"]) for m in raw["manifests"]}
    built = {arch: json.loads((d / "image.json").read_text())["manifest_digest"] for arch, d in IMAGES.items()}
    assert listed == {arch: ("linux", digest) for arch, digest in built.items()}
    summary = json.loads((INDEX / "image.json").read_text())
    assert summary["manifests"] == {f"linux/{a}": d for a, d in built.items()}


@pytest.mark.parametrize("arch", sorted(IMAGES))
def test_a_client_gets_its_own_platforms_image(arch) -> None:
    config = skopeo("--override-os", "linux", "--override-arch", arch, "inspect", "--config", f"oci:{INDEX / 'layout'}")
    assert config["architecture"] == arch
    chosen = skopeo("--override-os", "linux", "--override-arch", arch, "inspect", f"oci:{INDEX / 'layout'}")
    own = json.loads((IMAGES[arch] / "image.json").read_text())
    assert chosen["Layers"] == [layer["digest"] for layer in own["layers"]]


def test_localai_installs_its_platforms_folder_from_the_index_digest(tmp_path: Path) -> None:
    registry = RegistryServer(tmp_path / "registry")
    try:
        digest = json.loads((INDEX / "image.json").read_text())["manifest_digest"]
        target = f"{registry.host}/localai/backends"
        run = subprocess.run(
            [debian_tool("skopeo"), "copy", "--all", "--preserve-digests", "--dest-tls-verify=false",
             f"oci:{INDEX / 'layout'}", f"docker://{target}:cpu-rerankers"],
            capture_output=True, text=True, timeout=600,
        )
        assert run.returncode == 0, run.stderr
        for arch, variant in (("amd64", "cpu"), ("arm64", "cpu-arm64")):
            entry = {"name": "cpu-rerankers", "uri": f"{target}@{digest}"}
            folder = install(entry, tmp_path / arch / "backends", architecture=arch)
            assert tree_sha256(folder / "site-packages") == tree_sha256(dist_path("rerankers", variant, "site-packages")), arch
            record = json.loads((folder / "build-record.json").read_text())
            assert record["platform"] == {"amd64": "linux_x86_64", "arm64": "linux_aarch64"}[arch]
            assert json.loads((folder / "metadata.json").read_text())["digest"] == digest  # what LocalAI records
    finally:
        registry.stop()
