from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest
import zstandard

from localai.oci.scripts.layout import COMMANDS, group_paths, image_main, layer_groups, layer_main, main, read_layout, record_owners, write_layout


def _folder(root: Path, *, small: str = "small " * 100, big: bytes = b"B" * 4096, mtime: int = 1_700_000_000, mode: int = 0o644) -> Path:
    root.mkdir(parents=True)
    (root / "run.sh").write_text("#!/bin/sh\nexec true\n")
    (root / "run.sh").chmod(0o700)
    (root / "backend.pex").write_bytes(big)
    (root / "backend.pex").chmod(0o750)
    (root / "build-record.json").write_text(small)
    (root / "build-record.json").chmod(mode)
    for p in root.iterdir():
        os.utime(p, (mtime, mtime))
    return root


def _build(folder: Path, out: Path) -> dict:
    assert main([str(folder), str(out), "--ref-name=cpu-x", "--annotation=k=v", "--own-layer-bytes=1024"]) == 0
    return json.loads((out / "image.json").read_text())


def test_same_folder_gives_the_same_bytes_whatever_the_mtimes_modes_and_paths(tmp_path: Path) -> None:
    a = _build(_folder(tmp_path / "a/f"), tmp_path / "a/out")
    b = _build(_folder(tmp_path / "elsewhere/b/f", mtime=42, mode=0o600), tmp_path / "b/out")
    assert a == b
    assert (tmp_path / "a/out/image.oci.tar").read_bytes() == (tmp_path / "b/out/image.oci.tar").read_bytes()


def test_layers_are_normalised_tars_with_the_folder_at_the_root(tmp_path: Path) -> None:
    image = _build(_folder(tmp_path / "f"), tmp_path / "out")
    blobs = tmp_path / "out/layout/blobs/sha256"
    entries = {}
    for layer in image["layers"]:
        data = (blobs / layer["digest"].split(":")[1]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == layer["digest"].split(":")[1] and len(data) == layer["size"]
        assert layer_media_type(tmp_path, layer) == "application/vnd.oci.image.layer.v1.tar+zstd"  # compressible
        frame = zstandard.get_frame_parameters(data)  # one frame whose bytes depend on the input only
        assert (frame.content_size, frame.has_checksum) == (zstandard.CONTENTSIZE_UNKNOWN, False)
        raw = unzstd(data)
        assert "sha256:" + hashlib.sha256(raw).hexdigest() == layer["diff_id"]
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            for m in tar.getmembers():
                assert (m.mtime, m.uid, m.gid, m.uname, m.gname) == (0, 0, 0, "", "")
                entries[m.name] = m.mode
    # The big file alone in the first layer, the rest together, executables 0755.
    assert len(image["layers"]) == 2
    assert entries == {"backend.pex": 0o755, "run.sh": 0o755, "build-record.json": 0o644}


def unzstd(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()


def layer_media_type(tmp_path: Path, layer: dict) -> str:
    manifest, _ = read_layout(tmp_path / "out/layout")
    return next(l["mediaType"] for l in manifest["layers"] if l["digest"] == layer["digest"])


def test_incompressible_big_file_is_stored_as_plain_tar(tmp_path: Path) -> None:
    big = b"".join(hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(2048))  # 64 KiB of noise
    image = _build(_folder(tmp_path / "f", big=big), tmp_path / "out")
    assert layer_media_type(tmp_path, image["layers"][0]) == "application/vnd.oci.image.layer.v1.tar"
    data = (tmp_path / "out/layout/blobs/sha256" / image["layers"][0]["digest"].split(":")[1]).read_bytes()
    assert image["layers"][0]["diff_id"] == image["layers"][0]["digest"]  # uncompressed: the same
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.extractfile("backend.pex").read() == big
    assert layer_media_type(tmp_path, image["layers"][1]).endswith("+zstd")


def test_an_identical_big_file_is_the_same_layer_in_two_images(tmp_path: Path) -> None:
    a = _build(_folder(tmp_path / "a", small="one"), tmp_path / "a-out")
    b = _build(_folder(tmp_path / "b", small="two"), tmp_path / "b-out")
    assert a["layers"][0] == b["layers"][0]  # shared: a registry stores it once
    assert a["layers"][1] != b["layers"][1] and a["manifest_digest"] != b["manifest_digest"]


def test_layout_index_and_docker_archive_view_agree(tmp_path: Path) -> None:
    image = _build(_folder(tmp_path / "f"), tmp_path / "out")
    manifest, digest = read_layout(tmp_path / "out/layout")
    assert digest == image["manifest_digest"]
    assert [l["digest"] for l in manifest["layers"]] == [l["digest"] for l in image["layers"]]
    assert manifest["annotations"] == {"k": "v"}
    with tarfile.open(tmp_path / "out/image.oci.tar") as tar:
        names = tar.getnames()
        docker = json.load(tar.extractfile("manifest.json"))
    assert {"oci-layout", "index.json", "manifest.json"} <= set(names) and names == sorted(names)
    assert docker[0]["Config"] == "blobs/sha256/" + manifest["config"]["digest"].split(":")[1]
    assert docker[0]["Layers"] == ["blobs/sha256/" + l["digest"].split(":")[1] for l in manifest["layers"]]


def test_a_folder_without_an_executable_run_sh_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "f")
    (folder / "run.sh").chmod(0o644)
    with pytest.raises(ValueError, match="no executable run.sh"):
        write_layout(folder, tmp_path / "out", ref_name="x", annotations={})


def test_an_own_layer_dir_is_one_layer_shared_by_images_that_carry_it(tmp_path: Path) -> None:
    """python/ (the portable interpreter) is one layer, first, with the same digest in two images
    whose other files differ; its big files do not get layers of their own."""
    images = []
    for name, small in (("a", "one"), ("b", "two")):
        folder = _folder(tmp_path / name, small=small, big=small.encode() * 2048)
        (folder / "python/bin").mkdir(parents=True)
        (folder / "python/bin/python3.11").write_bytes(b"\x7fELF" + b"x" * 4096)  # over --own-layer-bytes
        (folder / "python/bin/python3.11").chmod(0o755)
        (folder / "python/lib/python3.11").mkdir(parents=True)
        (folder / "python/lib/python3.11/os.py").write_text("# os\n")
        out = tmp_path / f"{name}-out"
        assert main([str(folder), str(out), "--ref-name=x", "--own-layer-bytes=1024", "--own-layer-dir=python"]) == 0
        images.append(json.loads((out / "image.json").read_text()))
        layer = (out / "layout/blobs/sha256" / images[-1]["layers"][0]["digest"].split(":")[1]).read_bytes()
        with tarfile.open(fileobj=io.BytesIO(unzstd(layer))) as tar:
            assert tar.getnames() == ["python", "python/bin", "python/lib", "python/lib/python3.11", "python/bin/python3.11", "python/lib/python3.11/os.py"]
            assert tar.getmember("python/bin/python3.11").mode == 0o755
    a, b = images
    assert len(a["layers"]) == 3  # python/, the big file, the small files
    assert a["layers"][0] == b["layers"][0]
    assert a["layers"][1] != b["layers"][1] and a["manifest_digest"] != b["manifest_digest"]


def _install(folder: Path, dist: str, files: dict[str, bytes]) -> None:
    """`dist` installed in folder/site-packages/ as install_wheel.py leaves it: its files and a
    RECORD listing them (RECORD's own line last, no hash)."""
    site = folder / "site-packages"
    for name, data in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)
    record = site / f"{dist}.dist-info/RECORD"
    record.parent.mkdir(parents=True, exist_ok=True)
    rows = [f"{name},sha256=x,{len(data)}" for name, data in sorted(files.items())]
    record.write_text("\n".join([*rows, f"{dist}.dist-info/RECORD,,"]) + "\n")


def _noise(n: int, seed: int = 0) -> bytes:
    return b"".join(hashlib.sha256((seed * 1_000_000 + i).to_bytes(8, "big")).digest() for i in range(n // 32))


def test_an_installed_distribution_is_the_same_layer_in_every_image_that_carries_it(tmp_path: Path) -> None:
    """A distribution in site-packages/ of 1 MiB or more (the default --own-layer-bytes), its
    files those its RECORD lists, is a layer of its own though no file of it is 1 MiB: two backends
    carrying the same torch share its digest, so a registry stores it once."""
    images = []
    for name in ("a", "b"):
        folder = _folder(tmp_path / name, small=name)
        (folder / "backend.pex").unlink()
        # A distribution it vendors keeps its own RECORD deeper down: still torch's files.
        _install(folder, "torch-2.13.0", {"torch/__init__.py": b"import torch._C\n", "torch/_C.so": _noise(700_000, 1),
                                          "torch/lib/libtorch.so": _noise(700_000, 2), "torch/_vendor/six.py": b"six",
                                          "torch/_vendor/six-1.0.dist-info/RECORD": b"six.py,,\n"})
        (folder / f"site-packages/{name}.py").write_text(name)
        out = tmp_path / f"{name}-out"
        assert main([str(folder), str(out), "--ref-name=x"]) == 0
        images.append(json.loads((out / "image.json").read_text()))
    a, b = images
    assert len(a["layers"]) == 2 and a["layers"][0] == b["layers"][0]  # torch, then the rest
    manifest, _ = read_layout(tmp_path / "a-out/layout")
    assert manifest["layers"][0]["mediaType"] == "application/vnd.oci.image.layer.v1.tar"  # noise: zstd saves nothing
    config = json.loads((tmp_path / "a-out/layout/blobs/sha256" / manifest["config"]["digest"].split(":")[1]).read_text())
    assert config["history"][0]["created_by"] == "localai-build: site-packages/torch-2.13.0.dist-info"
    blob = tmp_path / "a-out/layout/blobs/sha256" / manifest["layers"][0]["digest"].split(":")[1]
    with tarfile.open(blob) as tar:
        assert sorted(m.name for m in tar.getmembers() if m.isfile()) == [
            "site-packages/torch-2.13.0.dist-info/RECORD", "site-packages/torch/_C.so", "site-packages/torch/__init__.py",
            "site-packages/torch/_vendor/six-1.0.dist-info/RECORD", "site-packages/torch/_vendor/six.py", "site-packages/torch/lib/libtorch.so",
        ]
    assert a["layers"][1] != b["layers"][1]


def _stepwise(folder: Path, out: Path, own_layer_dirs: tuple[str, ...] = (), tarball: bool = True) -> None:
    """What oci/image.py runs: one `layer` process per group (its input only that group's files,
    at their paths, and the digest's list of executables), then one `image` process. Every file
    is executable on disk in the sandbox, as Pants' local hardlinks from its store make large
    files: the list, not the disk, must decide (a remote worker writes the digest's modes)."""
    groups = layer_groups(folder, 1024, own_layer_dirs)
    descriptors = []
    for i, (label, group) in enumerate(groups):
        sandbox = out.parent / f"{out.name}-layer{i}"
        for p in group:
            (sandbox / "folder" / p).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / p, sandbox / "folder" / p)
            (sandbox / "folder" / p).chmod(0o755)
        (sandbox / "executables.json").write_text(json.dumps([p for p in group if os.access(folder / p, os.X_OK)]))
        assert layer_main([str(sandbox / "folder"), str(sandbox / "out"), f"--created-by={label}",
                           f"--executables={sandbox / 'executables.json'}"]) == 0
        descriptors.append(json.loads((sandbox / "out/layer.json").read_text()))
        (blob,) = (sandbox / "out/blobs/sha256").iterdir()
        (out.parent / f"{out.name}-blobs" / f"blob-{blob.name}").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(blob, out.parent / f"{out.name}-blobs" / f"blob-{blob.name}" / blob.name)
    (out.parent / f"{out.name}-layers.json").write_text(json.dumps(descriptors))
    args = [str(out.parent / f"{out.name}-layers.json"), str(out.parent / f"{out.name}-blobs"), str(out), "--ref-name=cpu-x", "--annotation=k=v"]
    assert image_main([*args, *(["--tarball"] if tarball else [])]) == 0


def test_layer_by_layer_steps_give_the_bytes_of_the_one_shot_image(tmp_path: Path) -> None:
    """image.py builds the image from cached per-layer processes: the same manifest, tarball and
    image.json as layout.py's one-shot main, for big files, an own-layer dir and small files."""
    folder = _folder(tmp_path / "f")
    (folder / "python/bin").mkdir(parents=True)
    (folder / "python/bin/python3").write_bytes(b"\x7fELF" + b"p" * 3000)
    (folder / "python/bin/python3").chmod(0o755)
    (folder / "backend.pex").unlink()
    _install(folder, "a-1.0", {"a/__init__.py": _noise(3200)})
    _install(folder, "b-1.0", {"b/__init__.py": b"b" * 5000})
    _install(folder, "c-1.0", {"c/__init__.py": b"c"})
    (folder / "start.py").write_text("print(1)\n")
    whole = tmp_path / "whole"
    assert main([str(folder), str(whole), "--ref-name=cpu-x", "--annotation=k=v", "--own-layer-bytes=1024", "--own-layer-dir=python"]) == 0
    steps = tmp_path / "steps"
    _stepwise(folder, steps, ("python",))
    assert len(json.loads((whole / "image.json").read_text())["layers"]) == 5  # python/, a, b, c (small), small files
    assert (steps / "image.json").read_text() == (whole / "image.json").read_text()
    assert (steps / "image.oci.tar").read_bytes() == (whole / "image.oci.tar").read_bytes()


def test_without_tarball_the_layout_gives_the_same_tarball_on_demand(tmp_path: Path) -> None:
    """`pants package` without [localai-oci].tarball: no image.oci.tar; dist/'s layout (the image
    step's small files plus the layer blobs, as image.py merges them) makes the same bytes later
    (`layout.py tarball`, what `localai-bundle` writes)."""
    folder = _folder(tmp_path / "f")
    whole = tmp_path / "whole"
    assert main([str(folder), str(whole), "--ref-name=cpu-x", "--annotation=k=v", "--own-layer-bytes=1024"]) == 0
    steps = tmp_path / "steps"
    _stepwise(folder, steps, (), tarball=False)
    assert not (steps / "image.oci.tar").exists()
    assert (steps / "image.json").read_text() == (whole / "image.json").read_text()
    for blob_dir in (tmp_path / "steps-blobs").iterdir():
        for blob in blob_dir.iterdir():
            shutil.copyfile(blob, steps / "layout/blobs/sha256" / blob.name)
    assert COMMANDS["tarball"]([str(steps / "layout"), str(tmp_path / "on-demand.tar")]) == 0
    assert (tmp_path / "on-demand.tar").read_bytes() == (whole / "image.oci.tar").read_bytes()
    with pytest.raises((OSError, ValueError)):  # a folder that is no image layout
        COMMANDS["tarball"]([str(folder), str(tmp_path / "no.tar")])


def test_small_distributions_are_a_layer_apart_from_the_code() -> None:
    """An edit of the backend's code changes the last layer only: the small installed
    distributions (decided by the lock alone) share a layer of their own; a big distribution is
    one layer whatever its files' sizes; RECORD's owners decide, not the paths."""
    sizes = {
        "run.sh": 10,
        "start.py": 10,
        "build-record.json": 10,
        "site-packages/localai_backend/backend.py": 10,
        "site-packages/small/__init__.py": 500,
        "site-packages/small-1.0.dist-info/RECORD": 50,
        "site-packages/tiny.py": 500,
        "site-packages/tiny-1.0.dist-info/RECORD": 50,
        "site-packages/big/a.py": 600,
        "site-packages/big/b.so": 600,
        "site-packages/big-1.0.dist-info/RECORD": 50,
        "site-packages/engine.so": 5000,  # the backend's own big file: alone
    }
    records = {
        "site-packages/small-1.0.dist-info/RECORD": "small/__init__.py,sha256=x,500\nsmall-1.0.dist-info/RECORD,,\n",
        "site-packages/tiny-1.0.dist-info/RECORD": "tiny.py,sha256=x,500\n../../bin/tiny,sha256=x,1\ntiny-1.0.dist-info/RECORD,,\n",
        "site-packages/big-1.0.dist-info/RECORD": "big/a.py,sha256=x,600\nbig/b.so,sha256=x,600\nbig-1.0.dist-info/RECORD,,\n",
    }
    owners = record_owners(records)
    assert owners["site-packages/big/b.so"] == "site-packages/big-1.0.dist-info" and "bin/tiny" not in str(owners)
    assert group_paths(sizes, 1024, (), owners) == [
        ("localai-build: site-packages/big-1.0.dist-info", ["site-packages/big-1.0.dist-info/RECORD", "site-packages/big/a.py", "site-packages/big/b.so"]),
        ("localai-build: small locked distributions", [
            "site-packages/small-1.0.dist-info/RECORD", "site-packages/small/__init__.py", "site-packages/tiny-1.0.dist-info/RECORD",
            "site-packages/tiny.py",
        ]),
        ("localai-build: site-packages/engine.so", ["site-packages/engine.so"]),
        ("localai-build: small files", ["build-record.json", "run.sh", "site-packages/localai_backend/backend.py", "start.py"]),
    ]
