"""LocalAI's git and URL requirement forms, locked with hashes, packaged and served.

A folder in LocalAI's shape is written in a temporary repository; its requirements-cpu.txt names
a git repository made here (`git+file://...@v0.1.0`, a tag) and a wheel served by a loopback HTTP
server (a bare URL with a marker), as LocalAI's folders name theirs (`git+https://...@v0.4.4`,
kitten-tts' release wheel). Then, with real Pants: `localai-import` pins the tag to its commit
(3rdparty/localai-git-pins.toml), the tag is moved to another commit, `generate-lockfiles` locks
both with sha256 (the wheel's file hash; for git, the tree of the pinned commit), `package`
builds the PEX from the lock and its run.sh answers Health over gRPC, importing the pinned
commit's code and the served wheel.

The folder pins grpcio and protobuf as LocalAI's transformers folder does at 82c191a
(requirements.txt grpcio==1.83.0 protobuf==7.35.0, requirements-cpu.txt protobuf==7.35.0), pins
no grpcio-tools wheel accepts: its resolve gets none, and its stubs come from the grpc-stubs
resolve (grpcio-tools 1.71.0), which the served Health proves they import on that runtime.
"""
from __future__ import annotations

import functools
import hashlib
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, pex_distributions
from tests.integration.localai_folder import IMPORT_SOURCES, backend_py, locked, pants, read_lock
from tests.integration.registry import debian_tool
from tests.integration.temp_repo import make_temp_repo, write_wheel

FOLDER = "backends/localai/refs-example"
RESOLVE = "localai-refs-example-cpu"
PINNED_VALUE = "from-the-pinned-commit"

BACKEND_PY = backend_py({"tinyfix": "VALUE", "tinywheel": "VERSION"})


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run([debian_tool("git"), *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def make_git_package(root: Path) -> Path:
    """A pure-Python project `tinyfix` in a git repository, tagged v0.1.0."""
    (root / "tinyfix").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinyfix"\nversion = "0.1.0"\n'
    )
    (root / "tinyfix/__init__.py").write_text(f"VALUE = {PINNED_VALUE!r}\n")
    git(root, "init", "-q", ".")
    git(root, "add", ".")
    git(root, "commit", "-qm", "tinyfix 0.1.0")
    git(root, "tag", "v0.1.0")
    return root


@pytest.fixture(scope="module")
def wheel_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheels")
    wheel = write_wheel(folder, "tinywheel", "0.2.0")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SimpleHTTPRequestHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/{wheel.name}", wheel
    server.shutdown()


def test_git_and_url_requirements_lock_with_hashes_package_and_serve(tmp_path: Path, wheel_server) -> None:
    wheel_url, wheel = wheel_server
    source = make_git_package(tmp_path / "src" / "tinyfix")
    commit = git(source, "rev-parse", "v0.1.0^{commit}")
    repo = make_temp_repo(tmp_path / "repo", IMPORT_SOURCES)
    folder = repo / FOLDER
    folder.mkdir(parents=True)
    (folder / "backend.py").write_text(BACKEND_PY)
    (folder / "requirements.txt").write_text("grpcio==1.83.0\nprotobuf==7.35.0\n")
    (folder / "requirements-cpu.txt").write_text(
        f"protobuf==7.35.0\ngit+file://{source}@v0.1.0\n{wheel_url} ; python_version >= '3.8'\n"
    )

    out = pants(repo, "localai-import", "backends/localai")
    pins = (repo / "3rdparty/localai-git-pins.toml").read_text()
    assert f'"git+file://{source}@v0.1.0" = "{commit}"' in pins, pins
    assert f"{RESOLVE}: cpu variant" in out and "not lockable" not in out, out

    # The tag moves after the import: the lock and the artifact keep the pinned commit.
    (source / "tinyfix/__init__.py").write_text("VALUE = 'from-a-moved-tag'\n")
    git(source, "commit", "-qam", "moved")
    git(source, "tag", "-f", "v0.1.0")

    pants(repo, "generate-lockfiles", f"--resolve={RESOLVE}")
    lock = read_lock(repo / f"lockfiles/{RESOLVE}.lock")
    git_artifacts = locked(lock, "tinyfix")["artifacts"]
    assert [a["url"] for a in git_artifacts] == [f"git+file://localhost{source}@{commit}"]
    assert git_artifacts[0]["algorithm"] == "sha256" and len(git_artifacts[0]["hash"]) == 64
    url_artifacts = locked(lock, "tinywheel")["artifacts"]
    assert url_artifacts == [
        {"algorithm": "sha256", "hash": hashlib.sha256(wheel.read_bytes()).hexdigest(), "url": wheel_url}
    ]
    assert f'tinywheel @ {wheel_url} ; python_version >= "3.8"' in lock["requirements"], lock["requirements"]
    # LocalAI's transformers runtime, and no grpcio-tools: none can join these pins.
    assert (locked(lock, "grpcio")["version"], locked(lock, "protobuf")["version"]) == ("1.83.0", "7.35.0")
    assert not [r for r in lock["locked_resolves"][0]["locked_requirements"] if r["project_name"] == "grpcio-tools"]

    pants(repo, "package", f"{FOLDER}:cpu")
    dist = repo / "dist/backends/localai-refs-example/cpu"
    pex = repo / "dist/pex/localai-refs-example/cpu/backend.pex"
    assert {"tinyfix-0.1.0-py3-none-any.whl", "tinywheel-0.2.0-py3-none-any.whl"} <= set(pex_distributions(pex))
    # The stubs, from the grpc-stubs resolve's grpcio-tools 1.71.0 (gencode 5.29.0), not the folder's lock.
    assert "GRPC_GENERATED_VERSION = '1.71.0'" in (dist / "site-packages/backend_pb2_grpc.py").read_text()
    assert "# Protobuf Python Version: 5.29.0" in (dist / "site-packages/backend_pb2.py").read_text()
    with BackendProcess("localai-refs-example", run_sh=dist / "run.sh") as server:
        assert server.stub.Health(backend_pb2.HealthMessage(), timeout=10).message == b"OK"
        assert f"tinyfix={PINNED_VALUE} tinywheel=0.2.0" in server.output()
