"""From a fresh clone to a backend LocalAI installed: `./pants package`, `./pants publish` to a
real registry started here (the CNCF distribution registry), `./pants localai-gallery`, then
LocalAI's installer (localai_installer.py) resolves the gallery entry, pulls the image by digest,
stages and swaps it, and the installed run.sh serves a real VAD call. Then the same offline from
`./pants localai-bundle` (ocifile://) with the registry stopped. And skopeo, an independent
OCI implementation, reads the image tarball.

The image carries its own interpreter, as LocalAI's PORTABLE_PYTHON images do:
`[localai-portable-python].archive` points at a relocatable CPython 3.11 assembled here from
Debian's packages (portable_python_standin.py; the pinned python-build-standalone archive is on
GitHub, unreachable here), and run.sh is started with no Python on PATH and no pyenv."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from backends.proto import backend_pb2, backend_pb2_grpc
from tests.integration.backend_process import free_port, tree_sha256
from tests.integration.localai_installer import install, resolve_entry
from tests.integration.portable_python_standin import debian_cpython_archive
from tests.integration.registry import RegistryServer, debian_tool
from tests.integration.sbom_checks import record_files
from tests.integration.temp_repo import SILERO_VAD, SILERO_VAD_SOURCES, make_temp_repo, run_pants
from tests.integration.tiny_models import SAMPLE_RATE, synthetic_voice

ENTRY = "cpu-silero-vad"
PORTABLE = "--localai-portable-python-archive=//portable-python:cpython"


def pants(repo: Path, *args: str) -> str:
    # Every goal packages with the same interpreter option, so publish pushes the image package built.
    result = run_pants(repo, PORTABLE, *args, timeout=1800)
    assert result.returncode == 0, f"./pants {' '.join(args)}:\n{result.stdout[-4000:]}"
    return result.stdout


def add_standin_python(repo: Path, workdir: Path) -> Path:
    """The stand-in archive as a local `file` target of the clone, the way a user points the
    option at a local copy of the pinned archive."""
    archive = debian_cpython_archive(workdir)
    (repo / "portable-python").mkdir()
    shutil.copy(archive, repo / "portable-python" / archive.name)
    (repo / "portable-python/BUILD").write_text(f'file(name="cpython", source="{archive.name}")\n')
    return archive


def no_python_env(tmp: Path) -> dict[str, str]:
    """What LocalAI's container gives run.sh: no python on PATH, no pyenv. PATH is an empty folder."""
    empty = tmp / "bin-without-python"
    empty.mkdir(parents=True, exist_ok=True)
    return {"PATH": str(empty), "HOME": str(tmp), "LANG": "C.UTF-8"}


def serve_and_detect(folder: Path, env: dict[str, str]) -> list:
    """Start the installed run.sh as LocalAI does, Health, LoadModel, one VAD call; the server
    process must be the folder's own interpreter."""
    addr = f"127.0.0.1:{free_port()}"
    log = folder.parent / f"{folder.name}.log"
    assert not any(k.startswith("PYENV") for k in env) and shutil.which("python3", path=env["PATH"]) is None
    proc = subprocess.Popen([str(folder / "run.sh"), "--addr", addr], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    channel = grpc.insecure_channel(addr)
    stub = backend_pb2_grpc.BackendStub(channel)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, log.read_text()[-4000:]
            try:
                if stub.Health(backend_pb2.HealthMessage(), timeout=2).message == b"OK":
                    break
            except grpc.RpcError:
                assert time.monotonic() < deadline, log.read_text()[-4000:]
                time.sleep(0.3)
        # run.sh exec'd the interpreter in the folder (pex may re-exec into its venv, whose
        # python is a link to the same file).
        assert os.path.realpath(f"/proc/{proc.pid}/exe") == str((folder / "python/bin/python3.11").resolve())
        assert stub.LoadModel(backend_pb2.ModelOptions(), timeout=120).success
        silence = np.zeros(SAMPLE_RATE, np.float32)
        audio = np.concatenate([silence, synthetic_voice(3.0), silence])
        res = stub.VAD(backend_pb2.VADRequest(audio=audio.tolist()), timeout=120)
        return [(s.start, s.end) for s in res.segments]
    finally:
        channel.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    server = RegistryServer(tmp_path_factory.mktemp("registry"))
    yield server
    server.stop()


def test_publish_gallery_install_by_digest_then_offline_bundle(registry, tmp_path: Path) -> None:
    repo = make_temp_repo(tmp_path / "clone", SILERO_VAD_SOURCES)
    archive = add_standin_python(repo, tmp_path / "standin")
    pants(repo, "package", SILERO_VAD)
    image = json.loads((repo / "dist/images/silero-vad/cpu/image.json").read_text())
    digest = image["manifest_digest"]
    record = json.loads((repo / "dist/backends/silero-vad/cpu/build-record.json").read_text())
    archive_sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert record["interpreter"]["archive_sha256"] == archive_sha
    assert record["interpreter"]["executable"] == "python/bin/python3.11"
    assert archive_sha in (repo / "dist/backends/silero-vad/cpu/sbom.cdx.json").read_text()
    assert archive_sha in (repo / "dist/backends/silero-vad/cpu/provenance.intoto.json").read_text()
    # python/, then each installed distribution of 1 MiB or more (its RECORD's files: torch is the
    # same layer in every image), then the small distributions, then the other files.
    built = repo / "dist/backends/silero-vad/cpu"
    sizes = {p.relative_to(built / "site-packages").as_posix(): p.stat().st_size for p in (built / "site-packages").rglob("*") if p.is_file()}
    dists = [record_files(r) for r in (built / "site-packages").glob("*.dist-info/RECORD")]
    big = [d for d in dists if sum(sizes[f] for f in d) >= 1 << 20]
    owned = {f for d in dists for f in d}
    big_files = [f for f in sizes if f not in owned and sizes[f] >= 1 << 20]
    assert any(f.startswith("torch/") for d in big for f in d)
    assert len(image["layers"]) == 1 + len(big) + (1 if len(big) < len(dists) else 0) + len(big_files) + 1

    opts = (f"--localai-oci-registry={registry.host}", "--localai-oci-repository=localai/backends")
    out = pants(repo, *opts, "publish", SILERO_VAD)
    push = json.loads(next(l for l in out.splitlines() if l.startswith("{")))
    assert push["reference"] == f"{registry.host}/localai/backends@{digest}"
    # config + layers, all new to this registry
    assert push["uploaded_bytes"] > sum(l["size"] for l in image["layers"]) and push["skipped_bytes"] == 0
    # Publishing again uploads nothing: every blob is already there (one HEAD each).
    again = json.loads(next(l for l in pants(repo, *opts, "publish", SILERO_VAD).splitlines() if l.startswith("{")))
    assert again["uploaded_bytes"] == 0 and again["skipped_bytes"] > 0

    pants(repo, *opts, "--localai-oci-mirrors=['mirror.invalid/localai/backends']", "localai-gallery", SILERO_VAD)
    index = (repo / "dist/gallery/index.yaml").read_text()
    entry = resolve_entry(index, "silero-vad")
    assert entry["name"] == ENTRY
    assert entry["uri"] == f"{registry.host}/localai/backends@{digest}"
    assert entry["mirrors"] == [f"mirror.invalid/localai/backends@{digest}"]
    assert "sha256" not in entry

    backends = tmp_path / "localai/backends"
    (backends / ENTRY).mkdir(parents=True)
    (backends / ENTRY / "run.sh").write_text("#!/bin/sh\nexit 3\n")  # an older install, swapped out
    folder = install(entry, backends)
    assert not (backends / f"{ENTRY}.install-tmp").exists()
    assert os.access(folder / "run.sh", os.X_OK)
    assert json.loads((folder / "metadata.json").read_text())["digest"] == digest  # LocalAI's file
    assert json.loads((folder / "build-record.json").read_text())["name"] == "silero-vad"  # ours, untouched
    for name in ("sbom.cdx.json", "provenance.intoto.json"):
        assert (folder / name).read_bytes() == (repo / "dist/backends/silero-vad/cpu" / name).read_bytes()
    assert (folder / "python/bin/python3.11").is_file()
    built_site = tree_sha256(repo / "dist/backends/silero-vad/cpu/site-packages")
    assert tree_sha256(folder / "site-packages") == built_site
    env = no_python_env(tmp_path / "localai-home")
    assert serve_and_detect(folder, env), "no speech found by the installed backend"
    assert tree_sha256(folder / "site-packages") == built_site  # it ran and wrote nothing (no __pycache__)

    # Offline: the bundle, moved to where the air-gapped machine keeps it, registry gone.
    airgap = tmp_path / "airgap/bundle"
    pants(repo, "localai-bundle", f"--localai-bundle-location={airgap}", SILERO_VAD)
    shutil.copytree(repo / "dist/bundle", airgap)
    shutil.rmtree(repo / "dist/bundle")
    registry.stop()
    offline = resolve_entry((airgap / "index.yaml").read_text(), "silero-vad")
    assert offline["uri"] == f"ocifile://{airgap}/images/{ENTRY}.oci.tar"
    folder2 = install(offline, tmp_path / "airgapped-localai/backends")
    assert tree_sha256(folder2 / "site-packages") == built_site
    assert serve_and_detect(folder2, env), "no speech found by the backend installed from the bundle"


def test_image_tarball_is_read_by_an_independent_implementation(tmp_path: Path) -> None:
    """skopeo (containers/image) reads the tarball both ways it is meant to be read: as an OCI
    layout archive and as a `docker save` archive (the format LocalAI's ocifile:// loads)."""
    skopeo = debian_tool("skopeo")
    # runtime_package_dependencies wrote the layout; its tarball on demand, as localai-bundle writes it.
    tarball = tmp_path / "image.oci.tar"
    subprocess.run([sys.executable, "pants-plugins/localai/oci/scripts/layout.py", "tarball", "images/silero-vad/cpu/layout", str(tarball)], check=True)
    image = json.loads(Path("images/silero-vad/cpu/image.json").read_text())
    raw = subprocess.run([skopeo, "inspect", "--raw", f"oci-archive:{tarball}"], check=True, capture_output=True).stdout
    assert "sha256:" + __import__("hashlib").sha256(raw).hexdigest() == image["manifest_digest"]
    docker = json.loads(subprocess.run([skopeo, "inspect", f"docker-archive:{tarball}"], check=True, capture_output=True, text=True).stdout)
    assert docker["Layers"] == [l["diff_id"] for l in image["layers"]]
    assert docker["Labels"]["io.localai.backend"] == "silero-vad"
    # A full copy out of the docker-archive view checks every layer against its diff_id.
    subprocess.run([skopeo, "copy", f"docker-archive:{tarball}", f"dir:{tmp_path / 'copy'}"], check=True, capture_output=True)
