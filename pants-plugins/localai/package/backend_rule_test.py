"""`package_backend_variant`, the core packaging rule, run in-process (RuleRunner) on a fixture
backend, engine boundary included: the real Variant, requirements, lockfile, grpcio-tools stub
compilation, Pex and OCI image rules and their processes (pex, pip, protoc), no mocks.

The fixture `backends/tiny` pins grpcio, protobuf and grpcio-tools, and its lockfile is the
committed lockfiles/minilm-ggml-cpu.lock (a real Pants lockfile of exactly those pins, whose
wheels pex fetches from PyPI once into the shared pex_root cache, as `pants package` does).
The built PEX is then started: its entry point imports the stubs generated at build time.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pants.core.goals.package import BuiltPackage
from pants.engine.addresses import Address
from pants.engine.fs import Digest, DigestEntries, FileEntry
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from localai.model.artifact import BackendVariantFieldSet
from localai.model.folder import BUILD_RECORD
from localai.testutil import SHARED_RUNTIME, layout_tool_files, layout_tool_options, make_rule_runner, pex_cli_options, repo_file, repo_options

LOCK = repo_file("lockfiles/minilm-ggml-cpu.lock")
PINS = "grpcio==1.85.3\nprotobuf==7.36.2\n"
GRPC_TOOLS = "grpcio-tools==1.85.1\n"
FOLDER = "backends/tiny/cpu"

BACKEND_PY = '''"""Fixture backend: prints what the PEX carries."""
import sys


def main():
    import os

    import grpc
    from grpc._cython import cygrpc
    from backends.proto import backend_pb2, backend_pb2_grpc  # generated at build time

    rpcs = backend_pb2.DESCRIPTOR.services_by_name["Backend"].methods
    assert hasattr(backend_pb2_grpc, "BackendServicer")
    # Where the dynamic loader's $ORIGIN for this extension is: the folder's one site-packages
    # (where another distribution's libraries are too), and nothing of the host's on sys.path.
    site = os.environ["PYTHONPATH"]
    origin = os.path.dirname(os.path.realpath(cygrpc.__file__))
    host = [p for p in sys.path if p.endswith("-packages") and p != site]
    print(f"grpc={grpc.__version__} rpcs={len(rpcs)} args={sys.argv[1:]} origin_in_site={origin.startswith(site)} host_sites={host}")
'''


def backend(name: str, requirements: str = PINS + GRPC_TOOLS, lockfile: str | None = LOCK) -> dict[str, str]:
    """backends/<name> declared with the real localai_backend macro."""
    files = {
        f"backends/{name}/backend.py": BACKEND_PY,
        f"backends/{name}/requirements.txt": requirements,
        f"backends/{name}/requirements-cpu.txt": "# nothing cpu-specific\n",
        f"backends/{name}/BUILD": 'localai_backend(accelerators=["cpu"], version="1.2.3")\n',
    }
    if lockfile is not None:
        files[f"lockfiles/{name}-cpu.lock"] = lockfile
    return files



def with_forbidden(lock: str, project: str) -> str:
    """``lock`` with one more locked project (a CUDA package nemo's CPU lock held)."""
    header, _, body = lock.partition("\n{")
    data = json.loads("{" + body)
    data["locked_resolves"][0]["locked_requirements"].append(
        {"project_name": project, "version": "12.9.0", "artifacts": [], "requires_dists": [], "requires_python": None}
    )
    return header + "\n" + json.dumps(data)


def with_requirement(lock: str, project: str, requirement: str) -> str:
    """``lock`` where ``project`` also requires ``requirement`` (which the lock then breaks)."""
    header, _, body = lock.partition("\n{")
    data = json.loads("{" + body)
    (req,) = [r for r in data["locked_resolves"][0]["locked_requirements"] if r["project_name"] == project]
    req["requires_dists"].append(requirement)
    return header + "\n" + json.dumps(data)


def without(lock: str, project: str) -> str:
    """``lock`` as pex's `lock create --exclude=<project>` writes it: without the project (which
    only grpcio needs here), and recording it."""
    header, _, body = lock.partition("\n{")
    data = json.loads("{" + body)
    reqs = data["locked_resolves"][0]["locked_requirements"]
    data["locked_resolves"][0]["locked_requirements"] = [r for r in reqs if r["project_name"] != project]
    data["excluded"] = [project]
    return header + "\n" + json.dumps(data)


# tiny packages; nolock has no lockfile; notools does not pin grpcio-tools; cudalock's lockfile
# holds a package the cpu accelerator forbids; brokenlock's cannot install (grpcio wants a newer
# typing-extensions than it holds); excluding leaves typing-extensions (grpcio's) out, locked
# without it; staleexclude excludes it too, but its lock (as `generate-lockfiles` writes one) holds it.
BACKENDS = ("tiny", "nolock", "notools", "cudalock", "brokenlock", "excluding", "staleexclude")
FILES = {
    **SHARED_RUNTIME,
    **layout_tool_files(),
    "3rdparty/accelerators.toml": repo_file("3rdparty/accelerators.toml"),
    "3rdparty/accelerators/cpu.txt": repo_file("3rdparty/accelerators/cpu.txt"),
    "backends/proto/backend.proto": repo_file("backends/proto/backend.proto"),
    "backends/proto/BUILD": 'localai_proto(name="proto", sources=["backend.proto"])\n',
    **backend("tiny"),
    **backend("nolock", lockfile=None),
    **backend("notools", requirements=PINS),
    **backend("cudalock", lockfile=with_forbidden(LOCK, "cuda-bindings")),
    **backend("brokenlock", lockfile=with_requirement(LOCK, "grpcio", "typing-extensions>=99")),
    **backend("excluding", lockfile=without(LOCK, "typing-extensions")),
    "backends/excluding/BUILD": 'localai_backend(accelerators=["cpu"], exclude={"cpu": ["typing-extensions"]})\n',
    **backend("staleexclude"),
    "backends/staleexclude/BUILD": 'localai_backend(accelerators=["cpu"], exclude={"cpu": ["typing-extensions"]})\n',
}


@pytest.fixture(scope="module")
def rule_runner() -> RuleRunner:
    # One RuleRunner (one rule graph) for every test of this file.
    rule_runner = make_rule_runner(QueryRule(BuiltPackage, [BackendVariantFieldSet]), QueryRule(DigestEntries, [Digest]))
    rule_runner.write_files(FILES)
    rule_runner.set_options(
        [
            *pex_cli_options(),
            *repo_options(),
            f"--python-resolves={ {f'{b}-cpu': f'lockfiles/{b}-cpu.lock' for b in BACKENDS}!r}",
            f"--python-resolves-to-constraints-file={ {f'{b}-cpu': '3rdparty/accelerators/cpu.txt' for b in BACKENDS}!r}",
            *layout_tool_options(),
        ],
        env_inherit={"PATH", "PYENV_ROOT", "HOME"},
    )
    return rule_runner


def package(rule_runner: RuleRunner, name: str) -> BuiltPackage:
    tgt = rule_runner.get_target(Address(f"backends/{name}", target_name="cpu"))
    return rule_runner.request(BuiltPackage, [BackendVariantFieldSet.create(tgt)])


@pytest.fixture(scope="module")
def built(rule_runner) -> tuple[RuleRunner, BuiltPackage]:
    result = package(rule_runner, "tiny")
    rule_runner.write_digest(result.digest, path_prefix="dist")
    return rule_runner, result


def test_packaging_writes_the_folder_localai_loads_and_its_image(built) -> None:
    rule_runner, result = built
    artifacts = [a.relpath for a in result.artifacts]
    assert artifacts == [f"{FOLDER}/{n}" for n in ("site-packages/", "run.sh", "start.py", BUILD_RECORD, "sbom.cdx.json",
                                                    "provenance.intoto.json")] + ["images/tiny/cpu/", "pex/tiny/cpu/backend.pex/"]
    entries = {e.path: e for e in rule_runner.request(DigestEntries, [result.digest]) if isinstance(e, FileEntry)}
    # Installed and compiled: grpc's files and their bytecode, listed in its RECORD.
    assert entries[f"{FOLDER}/run.sh"].is_executable and f"{FOLDER}/start.py" in entries
    assert f"{FOLDER}/site-packages/grpc/__pycache__/__init__.cpython-311.pyc" in entries
    assert f"{FOLDER}/site-packages/backends/proto/__pycache__/backend_pb2.cpython-311.pyc" in entries  # the backend's own
    (record,) = [p for p in entries if p.startswith(f"{FOLDER}/site-packages/grpcio-1.85.3.dist-info/RECORD")]
    assert not any(".deps" in p or "backend.pex" in p for p in entries if p.startswith(FOLDER))
    # The PEX it was installed from, beside it: pex's packed layout.
    assert entries["pex/tiny/cpu/backend.pex/__main__.py"].is_executable
    assert any(p.startswith("pex/tiny/cpu/backend.pex/.deps/grpcio-1.85.3-") for p in entries)
    assert "metadata.json" not in {Path(p).name for p in entries}  # LocalAI writes its own
    assert "images/tiny/cpu/image.json" in entries


def test_build_record_names_variant_lockfile_and_artifact(built, tmp_path) -> None:
    rule_runner, _ = built
    dist = Path(rule_runner.build_root, "dist", FOLDER)
    # The tree sha256 by the coreutils recipe the build record documents (model/artifact.py FileTree).
    def listing(where: Path) -> str:
        return subprocess.run(
            "find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum",
            shell=True, cwd=where, capture_output=True, text=True, check=True,
        ).stdout.split()[0]

    size = sum(f.stat().st_size for f in (dist / "site-packages").rglob("*") if f.is_file())
    record = json.loads((dist / BUILD_RECORD).read_text())
    assert record == {
        "name": "tiny",
        "accelerator": "cpu",
        "platform": "linux_x86_64",
        "capabilities": ["default", "cpu"],
        "version": "1.2.3",
        "resolve": "tiny-cpu",
        "lockfile": "lockfiles/tiny-cpu.lock",
        "lockfile_sha256": hashlib.sha256(LOCK.encode()).hexdigest(),
        "artifact": "site-packages",
        "artifact_sha256": listing(dist / "site-packages"),
        "artifact_size": size,
        "pex_sha256": listing(Path(rule_runner.build_root, "dist/pex/tiny/cpu/backend.pex")),
        "sbom": "sbom.cdx.json",
        "provenance": "provenance.intoto.json",
    }
    sbom = json.loads((dist / "sbom.cdx.json").read_text())
    # What is inside: grpcio and protobuf, each hashed as the files its RECORD lists (the recipe
    # over them, recomputed with coreutils); grpcio-tools is build-only.
    inside = {c["name"]: c for c in sbom["components"]}
    assert set(inside) >= {"grpcio", "protobuf"} and "grpcio-tools" not in inside
    for c in inside.values():
        record = dist / next(p["value"] for p in c["properties"] if p["name"] == "localai:path")
        files = sorted(line.split(",")[0] for line in record.read_text().splitlines())
        assert any(f.endswith(".pyc") for f in files)
        listed = tmp_path / c["name"]
        for f in files:
            (listed / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(dist / "site-packages" / f, listed / f)
        assert c["hashes"] == [{"alg": "SHA-256", "content": listing(listed)}]
    # The test's build root is no git checkout: the provenance says so instead of naming a commit.
    provenance = json.loads((dist / "provenance.intoto.json").read_text())
    source = provenance["predicate"]["buildDefinition"]["externalParameters"]["source"]
    assert source["annotations"]["localai:source"].startswith("no checkout")


def test_the_pex_runs_with_stubs_compiled_from_its_own_lock(built, tmp_path) -> None:
    rule_runner, _ = built
    dist = Path(rule_runner.build_root, "dist", FOLDER)
    # run.sh is what LocalAI executes: with the host's PYTHONPATH set, it is still the folder alone.
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path / "no-home")}
    out = subprocess.run(["sh", str(dist / "run.sh"), "--addr", "127.0.0.1:0"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "grpc=1.85.3 rpcs=52 args=['--addr', '127.0.0.1:0'] origin_in_site=True host_sites=[]"


def test_missing_lockfile_names_the_target_and_the_command_that_makes_it(rule_runner) -> None:
    with pytest.raises(ExecutionError) as e:
        package(rule_runner, "nolock")
    msg = str(e.value)
    assert "backends/nolock:cpu: lockfiles/nolock-cpu.lock does not exist, so this variant cannot be built" in msg
    assert "./pants generate-lockfiles --resolve=nolock-cpu" in msg and "commit lockfiles/nolock-cpu.lock" in msg


def test_missing_grpcio_tools_pin_names_the_file_and_why(rule_runner) -> None:
    with pytest.raises(ExecutionError) as e:
        package(rule_runner, "notools")
    assert ("backends/notools:cpu: backends/notools/requirements.txt must pin grpcio-tools (the build compiles "
            "backend.proto with it, from the same lock as grpcio/protobuf)") in str(e.value)


def test_a_lock_the_audit_refuses_is_not_packaged_and_the_package_is_named(rule_runner) -> None:
    # The audit's own check (BackendVariant.forbidden_locked), before anything is built.
    with pytest.raises(ExecutionError) as e:
        package(rule_runner, "cudalock")
    msg = str(e.value)
    assert "backends/cudalock:cpu: lockfiles/cudalock-cpu.lock locks cuda-bindings, which the cpu accelerator forbids" in msg
    assert "would fail the audit (`pants lint`)" in msg and "Fix:" in msg


def test_a_lock_that_cannot_install_is_not_packaged_and_the_requirement_is_named(rule_runner) -> None:
    # model/lock_consistency.py, before pex runs: what pip 20.3.4 wrote for LocalAI's rfdetr.
    with pytest.raises(ExecutionError) as e:
        package(rule_runner, "brokenlock")
    msg = str(e.value)
    assert "backends/brokenlock:cpu: lockfiles/brokenlock-cpu.lock cannot install what it was locked for on linux_x86_64" in msg
    assert "grpcio 1.85.3 requires typing-extensions>=99, the lock holds typing-extensions " in msg
    assert "then `./pants localai-lock --resolve=brokenlock-cpu` (it writes the lock only if it can install)" in msg


def test_an_excluded_project_is_not_in_the_pex_nor_the_folder(rule_runner) -> None:
    """BUILD `exclude`: a lock made without the project (pex's `lock create --exclude`) builds a
    PEX and a folder without it, and the PEX's boot-time resolve does not ask for it."""
    result = package(rule_runner, "excluding")
    paths = {e.path for e in rule_runner.request(DigestEntries, [result.digest]) if isinstance(e, FileEntry)}
    deps = {p.split("/.deps/", 1)[1].split("/", 1)[0] for p in paths if "/.deps/" in p}
    assert any(d.startswith("grpcio-1.85.3-") for d in deps) and any(d.startswith("protobuf-7.36.2-") for d in deps)
    assert not [d for d in deps if d.lower().startswith("typing_extensions")], deps
    assert not [p for p in paths if "/site-packages/typing_extensions" in p]
    (info,) = [p for p in paths if p.endswith("backend.pex/PEX-INFO")]
    rule_runner.write_digest(result.digest, path_prefix="dist-excluding")
    pex_info = json.loads(Path(rule_runner.build_root, "dist-excluding", info).read_text())
    assert pex_info["excluded"] == ["typing-extensions"] and not pex_info["ignore_errors"]


def test_a_lock_made_without_the_builds_exclude_is_refused_naming_the_command(rule_runner) -> None:
    with pytest.raises(ExecutionError) as e:
        package(rule_runner, "staleexclude")
    msg = str(e.value)
    assert (
        "backends/staleexclude:cpu: lockfiles/staleexclude-cpu.lock was locked excluding nothing (as `generate-lockfiles` "
        "locks), but BUILD `exclude` names ['typing-extensions']"
    ) in msg
    assert "Fix: `./pants localai-lock --resolve=staleexclude-cpu`" in msg
