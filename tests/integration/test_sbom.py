"""The SBOMs of packaged backends, as CycloneDX's tools and a reader with sha256sum see them."""
from __future__ import annotations

import pytest

from tests.integration.backend_process import dist_path, packaged_cpu_levels
from tests.integration.sbom_checks import check_sbom

# Built for their own tests already (one build per CI run): a wheelhouse torch, native engines.
VARIANTS = (("transformers", "cpu"), ("minilm-ggml", "cpu"))


@pytest.mark.parametrize("backend,accelerator", VARIANTS, ids=lambda v: v)
def test_sbom_is_valid_cyclonedx_and_names_the_files_inside(backend: str, accelerator: str) -> None:
    folder = dist_path(backend, accelerator, "sbom.cdx.json").parent
    sbom = check_sbom(folder)
    by_name = {c["name"]: c for c in sbom["components"]}
    assert "grpcio" in by_name and "grpcio-tools" not in by_name  # build-only: not inside
    if backend == "transformers":
        torch = by_name["torch"]
        urls = [r["url"] for r in torch["externalReferences"]]
        assert urls == ["https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
        assert any(d["ref"] == torch["bom-ref"] and d["dependsOn"] for d in sbom["dependencies"])
    else:
        libs = [c for c in sbom["components"] if c["bom-ref"].startswith("native:")]
        levels = packaged_cpu_levels()
        assert len(libs) == len(levels) and all(c["hashes"] for c in libs)  # one per packaged CPU level
