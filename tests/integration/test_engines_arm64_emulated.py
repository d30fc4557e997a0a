"""llama-cpp and stablediffusion-ggml `:cpu-arm64`, cross-built on x86_64 by `pants package`
(libllama.so / libstable-diffusion.so cross-compiled with zig for aarch64-linux-gnu.2.28 at ggml's
ARM levels), served by an aarch64 CPython 3.11 under qemu-aarch64-static through their run.sh.

llama-cpp: a tiny random Llama made here (transformers, converted with llama.cpp's own
converter) loaded by both builds; 32 greedy tokens give the same text as llama-cpp:cpu and the
embeddings agree (cosine > 0.9999). stablediffusion-ggml: the server is healthy; no image is
made (the smallest SD model sd.cpp loads is a full-width UNet: minutes per step emulated).
Timings under emulation are emulation's."""
from __future__ import annotations

import numpy as np
import pytest

from backends.proto import backend_pb2
from tests.integration.aarch64_python import aarch64_engine_builds, emulated_env, served_beside_x86_64
from tests.integration.backend_process import BackendProcess
from tests.integration.llama_cpp_models import convert, make_model
from tests.integration.rpc_checks import assert_healthy

EMULATED = 900  # seconds
LIBRARIES = {"llama-cpp": ("llama-cpp", "libllama.so"), "stablediffusion-ggml": ("stable-diffusion-cpp", "libstable-diffusion.so")}


@pytest.mark.parametrize("backend", sorted(LIBRARIES))
def test_the_arm64_folder_carries_only_aarch64_engine_builds(backend):
    aarch64_engine_builds(backend, *LIBRARIES[backend])


@pytest.fixture(scope="module")
def llama_servers(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-llama")
    make_model(root / "hf")
    gguf = convert(root / "hf", root / "tiny-llama-f32.gguf")
    options = backend_pb2.ModelOptions(Model=str(gguf), ContextSize=128, Threads=2, Embeddings=True,
                                       CacheTypeKey="f32", CacheTypeValue="f32", FlashAttention="off")
    with served_beside_x86_64("llama-cpp", tmp_path_factory.mktemp("qemu-bin"), EMULATED, load=options) as pair:
        yield pair


def test_llama_greedy_text_and_embeddings_equal_the_x86_64_build(llama_servers):
    arm, x86 = llama_servers
    greedy = backend_pb2.PredictOptions(Prompt="the quick brown fox", Tokens=32, Temperature=0, IgnoreEOS=True)
    a, b = (s.stub.Predict(greedy, timeout=EMULATED).message.decode() for s in llama_servers)
    print({"arm64": a, "x86_64": b})
    assert a == b and a
    ea, eb = (np.asarray(s.stub.Embedding(backend_pb2.PredictOptions(Embeddings="the quick brown fox"),
                                          timeout=EMULATED).embeddings, dtype=np.float64) for s in llama_servers)
    cos = float(ea @ eb / (np.linalg.norm(ea) * np.linalg.norm(eb)))
    print({"cosine": cos})
    assert ea.shape == eb.shape and cos > 0.9999
    assert_healthy(arm.stub)


def test_stablediffusion_server_is_healthy_under_qemu(tmp_path):
    server = BackendProcess("stablediffusion-ggml", "cpu-arm64", env=emulated_env(tmp_path))
    try:
        server.wait_healthy(timeout=EMULATED)
        assert_healthy(server.stub)
    finally:
        server.stop()
