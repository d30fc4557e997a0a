"""A folder-scoped extra index (vllm's `--extra-index-url https://wheels.vllm.ai/0.27.1/cu130` in
its requirements-cublas13.txt), imported, locked with hashes, packaged and served.

A folder in LocalAI's shape is written in a temporary repository. Its requirements-cublas13.txt
names a PEP 503 simple index served on loopback by this test, holding a wheel made here that
PyPI lacks (`tinyindexed`); its requirements-cpu.txt asks for the same wheel without the index.
With real Pants: `localai-import` skips the cuda13 variant until the index is declared in
`[localai.overrides.index-example] extra_indexes`, then declares it with a pip options file of
its own; `generate-lockfiles` locks the wheel from that index with its sha256 for the cuda13
resolve, and cannot lock it for the cpu resolve (which never sees the index); `package` installs
it from the lock, the build record names the index, and run.sh answers Health over gRPC.
"""
from __future__ import annotations

import functools
import hashlib
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, pex_distributions
from tests.integration.localai_folder import IMPORT_SOURCES, backend_py, locked, pants, read_lock
from tests.integration.temp_repo import make_temp_repo, run_pants, write_wheel

FOLDER = "backends/localai/index-example"
CUDA13, CPU = "localai-index-example-cuda13", "localai-index-example-cpu"
OWN_PIP_OPTIONS = f"3rdparty/accelerators/variants/{CUDA13}.txt"


@pytest.fixture(scope="module")
def simple_index(tmp_path_factory):
    """A PEP 503 simple index on loopback: /simple/tinyindexed/ links the wheel with its sha256."""
    root = tmp_path_factory.mktemp("index")
    wheel = write_wheel(root / "files", "tinyindexed", "0.3.0")
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (root / "simple/tinyindexed").mkdir(parents=True)
    (root / "simple/index.html").write_text('<!DOCTYPE html><html><body><a href="tinyindexed/">tinyindexed</a></body></html>\n')
    (root / "simple/tinyindexed/index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="../../files/{wheel.name}#sha256={sha256}">{wheel.name}</a></body></html>\n'
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SimpleHTTPRequestHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    yield f"{base}/simple", f"{base}/files/{wheel.name}", wheel
    server.shutdown()


def test_a_folder_scoped_index_is_locked_packaged_and_served_for_its_variant_alone(tmp_path: Path, simple_index) -> None:
    index, wheel_url, wheel = simple_index
    repo = make_temp_repo(tmp_path / "repo", IMPORT_SOURCES)
    folder = repo / FOLDER
    folder.mkdir(parents=True)
    (folder / "backend.py").write_text(backend_py({"tinyindexed": "VERSION"}))
    (folder / "requirements.txt").write_text("grpcio==1.83.0\nprotobuf==7.35.0\n")
    (folder / "requirements-cpu.txt").write_text("tinyindexed==0.3.0\n")
    (folder / "requirements-cublas13.txt").write_text(f"--extra-index-url {index}/\ntinyindexed==0.3.0\n")

    # Undeclared: the cuda13 variant is skipped, naming the file, the line and the declaration.
    undeclared = run_pants(repo, "localai-import", "backends/localai", timeout=900)
    assert undeclared.returncode == 1, undeclared.stdout[-4000:]
    assert (
        f"skipped {FOLDER} (cuda13 variant): {FOLDER}/requirements-cublas13.txt line 1: `--extra-index-url {index}/`"
        in undeclared.stdout
    ), undeclared.stdout[-4000:]
    declaration = f'[localai.overrides.index-example] extra_indexes = {{ cuda13 = ["{index}"] }}'
    assert f"`{declaration}` in 3rdparty/accelerators.toml" in undeclared.stdout

    matrix = repo / "3rdparty/accelerators.toml"
    matrix.write_text(matrix.read_text() + f'\n[localai.overrides.index-example]\nextra_indexes = {{ cuda13 = ["{index}"] }}\n')
    out = pants(repo, "localai-import", "backends/localai")
    assert f"  extra index: {index}, seen by {CUDA13} alone ({OWN_PIP_OPTIONS})" in out, out
    assert (folder / "BUILD").read_text().endswith(
        f'localai_import(accelerators=["cpu", "cuda13"], arm64=["cpu"], arm64_tags=["by-hand"], '
        f'extra_indexes={{"cuda13": ["{index}"]}})\n'
    )
    toml_text = (repo / "pants.toml").read_text()
    assert f'"{CUDA13}" = "{OWN_PIP_OPTIONS}"' in toml_text and f'"{CPU}" = "3rdparty/accelerators/cpu.txt"' in toml_text
    # The index is in the variant's own pip options file and in no accelerator's.
    assert f"--extra-index-url {index}\n" in (repo / OWN_PIP_OPTIONS).read_text()
    assert not [p for p in (repo / "3rdparty/accelerators").glob("*.txt") if index in p.read_text()]
    pants(repo, "localai-resolves", "--check")

    pants(repo, "generate-lockfiles", f"--resolve={CUDA13}")
    lock = read_lock(repo / f"lockfiles/{CUDA13}.lock")
    assert locked(lock, "tinyindexed")["artifacts"] == [
        {"algorithm": "sha256", "hash": hashlib.sha256(wheel.read_bytes()).hexdigest(), "url": wheel_url}
    ]
    assert (locked(lock, "grpcio")["version"], locked(lock, "protobuf")["version"]) == ("1.83.0", "7.35.0")

    # Index isolation: the folder's cpu resolve never sees the index, so PyPI's lack of the wheel fails its lock.
    cpu = run_pants(repo, "generate-lockfiles", f"--resolve={CPU}", timeout=900)
    assert cpu.returncode != 0, cpu.stdout[-4000:]
    assert "No matching distribution found for tinyindexed==0.3.0" in cpu.stdout, cpu.stdout[-4000:]
    assert not (repo / f"lockfiles/{CPU}.lock").exists()

    pants(repo, "package", f"{FOLDER}:cuda13")
    dist = repo / "dist/backends/localai-index-example/cuda13"
    assert wheel.name in pex_distributions(repo / "dist/pex/localai-index-example/cuda13/backend.pex")
    record = json.loads((dist / "build-record.json").read_text())
    assert (record["extra_indexes"], record["pip_options"]) == ([index], OWN_PIP_OPTIONS)
    assert any(f"names index {index}/: seen by this cuda13 variant's resolve alone" in line for line in record["pin_policy"]), record
    with BackendProcess("localai-index-example", run_sh=dist / "run.sh") as server:
        assert server.stub.Health(backend_pb2.HealthMessage(), timeout=10).message == b"OK"
        assert "tinyindexed=0.3.0" in server.output()
