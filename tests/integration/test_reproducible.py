"""Reproducibility and hermeticity: two clean builds of kitten-tts:cpu, in different directories, by different
HOMEs and umasks, one of them with a poisoned pip configuration, give byte-identical artifacts
(the backend folder, its SBOM and provenance, and its OCI image: same manifest digest, same
tarball); then a warm rebuild with no reachable package index still succeeds. Both builds carry a
portable CPython (python/, unpacked from the same archive: the Debian stand-in of
portable_python_standin.py), as the images CI publishes do."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.integration.portable_python_standin import debian_cpython_archive
from tests.integration.sbom_checks import check_sbom
from tests.integration.temp_repo import KITTEN_TTS, KITTEN_TTS_SOURCES, make_temp_repo, run_pants

OUT = "dist/backends/kitten-tts/cpu"
IMAGE = "dist/images/kitten-tts/cpu"
PEX = "dist/pex/kitten-tts/cpu/backend.pex"
FOLDER_FILES = ("site-packages/onnxruntime/__init__.py", "site-packages/onnxruntime/__pycache__/__init__.cpython-311.pyc", "start.py", "run.sh",
                "build-record.json", "sbom.cdx.json", "provenance.intoto.json")
PORTABLE = "--localai-portable-python-archive=//portable-python:cpython"


def add_archive(repo: Path, archive: Path) -> None:
    (repo / "portable-python").mkdir()
    shutil.copy(archive, repo / "portable-python" / archive.name)
    (repo / "portable-python/BUILD").write_text(f'file(name="cpython", source="{archive.name}")\n')


def tree(folder: Path) -> dict[str, tuple[bytes, bool]]:
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes(), os.access(p, os.X_OK)) for p in sorted(folder.rglob("*")) if p.is_file()
    }


def poisoned_pip(tmp_path: Path) -> dict[str, str]:
    """pip configuration that breaks any build that reads it (MACHINE-FACTS: it used to leak)."""
    conf = tmp_path / "poison"
    (conf / "pip").mkdir(parents=True)
    (conf / "constraints.txt").write_text("torch<=1.0\nnumpy<=1.0\n")
    text = f"[global]\nindex-url = http://127.0.0.1:9/simple\nconstraint = {conf}/constraints.txt\n"
    (conf / "pip/pip.conf").write_text(text)
    (conf / "pip.conf").write_text(text)
    return {
        "XDG_CONFIG_DIRS": str(conf),
        "PIP_CONFIG_FILE": str(conf / "pip.conf"),
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_CONSTRAINT": str(conf / "constraints.txt"),
    }


def build(repo: Path, cache: Path, env: dict[str, str], umask: int, *extra: str):
    old = os.umask(umask)
    try:
        return run_pants(
            repo,
            f"--local-store-dir={cache}/store",
            f"--named-caches-dir={cache}/named",
            PORTABLE,
            "--localai-oci-tarball",  # image.oci.tar too: compared below
            *extra,
            "package",
            KITTEN_TTS,
            env=env,
            timeout=1800,
        )
    finally:
        os.umask(old)


def test_two_clean_builds_are_identical_and_ignore_host_pip_config(tmp_path: Path) -> None:
    a = make_temp_repo(tmp_path / "a", KITTEN_TTS_SOURCES)
    b = make_temp_repo(tmp_path / "some/other/place/b", KITTEN_TTS_SOURCES)
    archive = debian_cpython_archive(tmp_path / "standin")
    add_archive(a, archive)
    add_archive(b, archive)
    home_b = tmp_path / "home-b"
    # The second user has its own HOME (so its own bootstrap, fed from the first's wheelhouse
    # as a mirror), umask 077 and a poisoned pip configuration.
    env_b = {
        "HOME": str(home_b),
        # The same interpreters, found through the user's pyenv rather than HOME.
        "PYENV_ROOT": os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")),
        "LOCALAI_WHEELHOUSE_DIRS": str(Path.home() / ".cache/localai-build/wheelhouse/cpu"),
        **poisoned_pip(tmp_path),
    }
    ra = build(a, tmp_path / "cache-a", {}, 0o022)
    assert ra.returncode == 0, ra.stdout[-4000:]
    rb = build(b, tmp_path / "cache-b", env_b, 0o077)
    assert rb.returncode == 0, rb.stdout[-4000:]
    assert any(home_b.glob(".cache/localai-build/pants-venv-*/.ready-*"))  # B really bootstrapped
    folder_a = tree(a / OUT)
    assert set(FOLDER_FILES) <= set(folder_a) and folder_a == tree(b / OUT)  # the .pyc files too
    assert "PEX-INFO" in tree(a / PEX) and tree(a / PEX) == tree(b / PEX)
    assert not (a / OUT / "metadata.json").exists()  # LocalAI writes its own file of that name
    sbom = check_sbom(a / OUT)  # with the portable CPython as a component, by its archive's sha256
    assert any(c["name"] == "cpython" and c["hashes"] for c in sbom["components"])
    python_a = tree(a / OUT / "python")
    assert "bin/python3.11" in python_a and python_a == tree(b / OUT / "python")
    image_a = json.loads((a / IMAGE / "image.json").read_text())
    assert image_a == json.loads((b / IMAGE / "image.json").read_text())
    assert (a / IMAGE / "image.oci.tar").read_bytes() == (b / IMAGE / "image.oci.tar").read_bytes()
    print(f"\nIMAGE manifest {image_a['manifest_digest']} identical in both builds")

    # Warm caches, no reachable index: packaging still succeeds, with the same bytes.
    shutil.rmtree(b / OUT / "site-packages")
    shutil.rmtree(b / PEX)
    rc = build(b, tmp_path / "cache-b", env_b, 0o077, "--python-repos-indexes=['http://127.0.0.1:9/simple/']")
    assert rc.returncode == 0, rc.stdout[-4000:]
    assert tree(b / OUT) == folder_a and tree(b / PEX) == tree(a / PEX)
