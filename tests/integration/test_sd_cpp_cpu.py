"""backends/stablediffusion-ggml:cpu (stable-diffusion.cpp from engines/stable-diffusion-cpp),
packaged by Pants, started as LocalAI starts it, called over gRPC, with a random SDXS-512-DS
checkpoint made here (tests/integration/sd_cpp_models.py): stable-diffusion.cpp detects it,
generates, and the backend writes the PNG.
"""
from __future__ import annotations

import re
import struct
import tarfile
import threading
import time
import zlib
from pathlib import Path

import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, dist_path, packaged_cpu_levels, packaged_levels, pex_distributions, pex_files, pex_path
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.rpc_checks import Code, assert_healthy, expect_code, state
from tests.integration.sd_cpp_models import random_sdxs

BACKEND = "stablediffusion-ggml"
LEVELS = packaged_cpu_levels()
LIB = "libstable-diffusion.so"
SDIST = Path("3rdparty/native/stable_diffusion_cpp_python-0.4.7.tar.gz")


@pytest.fixture(scope="module")
def pex() -> Path:
    return pex_path(BACKEND, "cpu")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = random_sdxs(tmp_path_factory.mktemp("sdxs") / "sdxs-random.safetensors")
    yield path
    path.unlink()  # ~0.9 GB


@pytest.fixture(scope="module")
def loaded(model):
    with BackendProcess(BACKEND) as proc:
        res = proc.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model), Threads=2, Options=["sampler:euler"]),
                                  timeout=300)
        assert res.success, res.message
        yield proc


def read_png(path: Path) -> tuple[int, int, int, bytes]:
    """(width, height, colour type, unfiltered pixel rows) of an 8-bit PNG: signature, IHDR,
    chunk CRCs and zlib stream are checked (filter 0 rows only, as the backend writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    pos, chunks = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        pos += 12 + n
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    w, h, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    assert depth == 8 and colour in (2, 6)
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    stride = w * (3 if colour == 2 else 4)
    assert len(raw) == h * (stride + 1) and all(raw[y * (stride + 1)] == 0 for y in range(h))
    return w, h, colour, raw


def generate(stub, dst: Path, seed: int, width: int = 64, height: int = 64, steps: int = 1, **kw) -> Path:
    req = backend_pb2.GenerateImageRequest(positive_prompt="a red cube", negative_prompt="blurry", width=width,
                                           height=height, step=steps, seed=seed, dst=str(dst), **kw)
    res = stub.GenerateImage(req, timeout=600)
    assert res.success, res.message
    return dst


def test_pex_carries_every_cpu_level_and_no_python_ml_stack(pex) -> None:
    names = pex_files(pex)
    assert packaged_levels(names, "stable-diffusion-cpp", LIB) == set(LEVELS)
    dists = pex_distributions(pex)
    banned = [d for d in dists if d.lower().startswith(("torch", "numpy", "pillow", "diffusers", "nvidia"))]
    assert not banned, banned


def header_api() -> set[str]:
    """The functions stable-diffusion.h declares (SD_API ... name(...)), from the pinned sdist."""
    with tarfile.open(SDIST) as tf:
        m = next(m for m in tf.getmembers() if m.name.endswith("vendor/stable-diffusion.cpp/include/stable-diffusion.h"))
        text = tf.extractfile(m).read().decode()
    return set(re.findall(r"^SD_API\s[^;(]*?\b(\w+)\s*\(", text, re.M))


def test_library_exports_only_the_c_api_of_the_header(pex) -> None:
    from elftools.elf.elffile import ELFFile

    api = header_api()
    assert {"new_sd_ctx", "generate_image", "sd_ctx_params_init", "str_to_scheduler"} <= api, sorted(api)
    for level in LEVELS:
        lib = pex / "localai_backend/engines/stable-diffusion-cpp" / level / LIB  # loose in the packed PEX
        with lib.open("rb") as f:
            dynsym = ELFFile(f).get_section_by_name(".dynsym")
            exported = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF" and s.name}
        assert exported == api, (level, sorted(exported - api)[:20], sorted(api - exported))


def test_generates_a_png_of_the_requested_size_deterministic_per_seed(loaded, tmp_path) -> None:
    a = read_png(generate(loaded.stub, tmp_path / "a.png", seed=42))
    assert a[:2] == (64, 64)
    pixels = a[3]
    assert len(set(pixels[1:1 + 64 * 3])) > 8, "the image is flat: the random network produced no structure"
    again = generate(loaded.stub, tmp_path / "again.png", seed=42)
    assert again.read_bytes() == (tmp_path / "a.png").read_bytes(), "same seed, different image"
    other = generate(loaded.stub, tmp_path / "b.png", seed=43)
    assert read_png(other)[3] != pixels, "different seeds gave the same image"
    # Two steps and a non-square size that is not the model's spatial multiple (64): the engine
    # generates 128x64 and the backend writes the centre 72x64 that was asked for.
    w, h, _, _ = read_png(generate(loaded.stub, tmp_path / "c.png", seed=7, width=72, height=64, steps=2))
    assert (w, h) == (72, 64)


def test_bad_input_is_invalid_argument_and_the_server_keeps_serving(loaded, tmp_path) -> None:
    stub = loaded.stub

    def req(**kw):
        base = dict(positive_prompt="x", width=64, height=64, step=1, seed=1, dst=str(tmp_path / "x.png"))
        return backend_pb2.GenerateImageRequest(**{**base, **kw})

    for kw, limit in ((dict(width=60), "multiple of 8"), (dict(height=4096), "8..2048"), (dict(width=0), "8..2048"),
                      (dict(step=151), "0..150"), (dict(step=-1), "0..150"), (dict(positive_prompt=""), "empty"),
                      (dict(dst=""), "dst"), (dict(src=str(tmp_path / "in.png")), "img2img")):
        err = expect_code(Code.INVALID_ARGUMENT, stub.GenerateImage, req(**kw))
        assert limit in err.details(), (kw, err.details())
    err = expect_code(Code.NOT_FOUND, stub.GenerateImage, req(dst=str(tmp_path / "no" / "x.png")))
    assert str(tmp_path / "no") in err.details()
    assert not (tmp_path / "x.png").exists()
    assert_healthy(stub)
    generate(stub, tmp_path / "ok.png", seed=1)


def safetensors_with_header(path: Path, header: bytes) -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)
    return path


def test_load_errors(tmp_path, model) -> None:
    """Files stable-diffusion.cpp refuses answer INVALID_ARGUMENT naming the file; headers whose
    JSON types would abort the process inside sd.cpp's safetensors reader are refused first."""
    garbage = safetensors_with_header(tmp_path / "garbage.safetensors", b'{"a": 1}')
    broken = [garbage,
              safetensors_with_header(tmp_path / "list.safetensors", b"[1, 2]"),
              safetensors_with_header(tmp_path / "shape.safetensors",
                                      b'{"t": {"dtype": "F16", "shape": "x", "data_offsets": [0, 4]}}'),
              safetensors_with_header(tmp_path / "offsets.safetensors",
                                      b'{"t": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4096]}}')]
    random_bytes = tmp_path / "random.ckpt"
    random_bytes.write_bytes(bytes(range(256)) * 64)
    truncated = tmp_path / "truncated.safetensors"
    with model.open("rb") as f:
        truncated.write_bytes(f.read(8 << 20))  # the whole header, 8 MB of the tensors
    with BackendProcess(BACKEND) as proc:
        for path in (*broken, random_bytes, truncated):
            err = expect_code(Code.INVALID_ARGUMENT, proc.stub.LoadModel, backend_pb2.ModelOptions(Model=str(path)),
                              timeout=300)
            assert path.name in err.details(), err.details()
        assert_healthy(proc.stub)
        expect_code(Code.FAILED_PRECONDITION, proc.stub.GenerateImage,
                    backend_pb2.GenerateImageRequest(positive_prompt="x", width=64, height=64, dst=str(tmp_path / "y.png")))
        err = expect_code(Code.NOT_FOUND, proc.stub.LoadModel, backend_pb2.ModelOptions(Model=str(tmp_path / "none.gguf")))
        assert "none.gguf" in err.details()
        err = expect_code(Code.INVALID_ARGUMENT, proc.stub.LoadModel, backend_pb2.ModelOptions(Model=str(garbage)))
        assert "garbage.safetensors" in err.details()
        err = expect_code(Code.INVALID_ARGUMENT, proc.stub.LoadModel,
                          backend_pb2.ModelOptions(Model=str(garbage), Options=["sampler:nope"]))
        assert "unknown sampler 'nope'" in err.details() and "euler" in err.details()
        err = expect_code(Code.INVALID_ARGUMENT, proc.stub.LoadModel,
                          backend_pb2.ModelOptions(Model=str(garbage), ModelPath=str(tmp_path),
                                                   Options=["vae_path:../../etc/passwd"]))
        assert "inside the models directory" in err.details()
        assert state(proc.stub) == backend_pb2.StatusResponse.UNINITIALIZED
        assert_healthy(proc.stub)
        assert_bad_models_answer_clearly(proc.stub, tmp_path / "bad", file_name="model.safetensors", takes_folders=False)


def test_free_during_a_generation_waits_for_it(model, tmp_path) -> None:
    """Free takes the model slot exclusively (backends/common/lifecycle.py): it waits for the
    running GenerateImage, then frees the context; nothing crashes."""
    with BackendProcess(BACKEND) as proc:
        assert proc.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model), Threads=2), timeout=300).success
        result = {}

        def gen():
            try:
                result["ok"] = generate(proc.stub, tmp_path / "during.png", seed=5, width=128, height=128, steps=2)
            except Exception as e:  # reported below
                result["error"] = e

        t = threading.Thread(target=gen)
        t.start()
        time.sleep(0.5)  # the generation is in flight (it takes seconds); if not, it finds no model
        assert proc.stub.Free(backend_pb2.HealthMessage(), timeout=600).success
        t.join()
        print("GenerateImage during Free:", result)
        assert "error" not in result or result["error"].code() in (Code.ABORTED, Code.FAILED_PRECONDITION), result
        assert state(proc.stub) == backend_pb2.StatusResponse.UNINITIALIZED
        assert_healthy(proc.stub)
        assert proc.proc.poll() is None


def test_every_cpu_level_this_machine_runs_generates(model, tmp_path) -> None:
    """LOCALAI_SD_CPU picks the library (as run.sh would by /proc/cpuinfo): each level this CPU
    runs loads the checkpoint and writes a PNG of the requested size; an unknown level is refused."""
    from backends.common.cpu_levels import CPU_LEVELS, cpu_flags

    images = {}
    for level in [lvl for lvl in reversed(CPU_LEVELS) if lvl in LEVELS and CPU_LEVELS[lvl] <= cpu_flags()]:
        with BackendProcess(BACKEND, env={"LOCALAI_SD_CPU": level}) as proc:
            assert proc.stub.LoadModel(backend_pb2.ModelOptions(Model=str(model), Threads=2), timeout=300).success
            images[level] = read_png(generate(proc.stub, tmp_path / f"{level}.png", seed=42))
            assert images[level][:2] == (64, 64)
    assert "fallback" in images and len(images) >= 2, images.keys()
    print({lvl: img[3] == images["fallback"][3] for lvl, img in images.items()})
    with BackendProcess(BACKEND, env={"LOCALAI_SD_CPU": "avx9000"}) as proc:
        err = expect_code(Code.INVALID_ARGUMENT, proc.stub.LoadModel, backend_pb2.ModelOptions(Model=str(model)))
        assert "avx9000" in err.details()
