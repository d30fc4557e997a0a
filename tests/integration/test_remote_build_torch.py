"""A torch backend on the sandboxed workers of test_remote_build.py: backends/transformers:cpu,
whose lock names torch's CPU wheel in the wheelhouse (`file://${WHEELHOUSE}/cpu/...`), packaged
with the wheelhouse in the worker image (pants.remote.toml maps ${WHEELHOUSE} there). Pants runs
nothing locally, no action names a client path, and the folder, image and PEX are byte-identical
to a local build in another clone.
"""
from __future__ import annotations

from pathlib import Path

from tests.integration.backend_process import tree_sha256
from tests.integration.remote_execution import Cluster
from tests.integration.temp_repo import backend_sources, make_temp_repo
from tests.integration.test_remote_build import assert_names_no_client_path, client_paths, package, probe_isolation, remote_execution_env
from tests.integration.worker_image import worker_image

TARGET = "backends/transformers:cpu"
SOURCES = (*backend_sources("transformers"), "pants.remote.toml")
OUTPUTS = ("dist/backends/transformers/cpu", "dist/images/transformers/cpu", "dist/pex/transformers/cpu")


def test_torch_backend_on_sandboxed_workers(tmp_path: Path) -> None:
    local = make_temp_repo(tmp_path / "local", SOURCES)
    package(local, tmp_path / "store-local", {}, TARGET)

    paths = client_paths(tmp_path)
    image, scripts_python = worker_image(tmp_path / "worker-image", Path.home() / ".cache/localai-build/wheelhouse")
    cluster = Cluster(tmp_path / "cluster", image, workers=2, client_paths=paths)
    try:
        probe = probe_isolation(cluster, paths)
        remote = make_temp_repo(tmp_path / "somewhere/else/remote", SOURCES)
        _, s, wall = package(remote, tmp_path / "store-remote", remote_execution_env(cluster.address, scripts_python), TARGET)
        ran = [a for a in cluster.actions() if a["status"] == 0 and a["action"] != probe]
    finally:
        cluster.stop()

    assert s.get("local_execution_requests", 0) == 0 and s["remote_execution_requests"] > 0, s
    assert len({a["action"] for a in ran}) == s["remote_execution_requests"], (len(ran), s)
    assert_names_no_client_path(ran, paths)
    for folder in OUTPUTS:
        assert tree_sha256(local / folder) and tree_sha256(local / folder) == tree_sha256(remote / folder), folder
    print(f"\nREMOTE-TORCH remote={wall:.1f}s actions={len(ran)}")
