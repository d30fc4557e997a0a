"""backends/diffusers:cpu, packaged by Pants, started as LocalAI starts it, called over gRPC.

The model is a tiny random StableDiffusionPipeline saved in the test (float32, CPU): the images
are noise, so the checks are on the file (a PNG of the requested size), determinism per seed
and the error codes.
"""
from __future__ import annotations

import hashlib

import pytest

from backends.proto import backend_pb2
from tests.integration.backend_process import BackendProcess, pex_distributions, pex_path
from tests.integration.bad_model_cases import assert_bad_models_answer_clearly
from tests.integration.rpc_checks import Code, assert_healthy, expect_code, second_load_is_aborted, state
from tests.integration.sd_single_file import ldm_checkpoint
from tests.integration.tiny_models import tiny_stable_diffusion


@pytest.fixture(scope="module")
def server():
    with BackendProcess("diffusers") as proc:
        yield proc


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_stable_diffusion(tmp_path_factory.mktemp("sd") / "tiny-sd")


def options(model, **kw) -> backend_pb2.ModelOptions:
    return backend_pb2.ModelOptions(Model=model.name, ModelPath=str(model.parent), **kw)


def image_request(dst=None, **kw) -> backend_pb2.GenerateImageRequest:
    fields = dict(positive_prompt="a photo of a cat", width=64, height=48, step=2, seed=7, dst=str(dst))
    fields.update(kw)
    return backend_pb2.GenerateImageRequest(**fields)


def test_artifact_holds_cpu_torch_and_no_cuda_package() -> None:
    dists = pex_distributions(pex_path("diffusers", "cpu"))
    assert any(d.startswith("torch-2.13.0+cpu-") for d in dists), dists
    assert [d for d in dists if d.lower().startswith(("nvidia", "cuda", "triton"))] == []


def test_generate_before_load_is_failed_precondition(server, tmp_path) -> None:
    expect_code(Code.FAILED_PRECONDITION, server.stub.GenerateImage, image_request(tmp_path / "o.png"))
    assert not (tmp_path / "o.png").exists()
    assert_healthy(server.stub)


def test_load_model_errors(server, model, tmp_path) -> None:
    err = expect_code(Code.NOT_FOUND, server.stub.LoadModel, backend_pb2.ModelOptions(Model=str(tmp_path / "nope")))
    assert "nope" in err.details()
    expect_code(Code.INVALID_ARGUMENT, server.stub.LoadModel, backend_pb2.ModelOptions(Model=""))
    # float16 on CPU deadlocks diffusers: refused up front.
    err = expect_code(Code.INVALID_ARGUMENT, server.stub.LoadModel, options(model, DType="float16"))
    assert "float16" in err.details()
    expect_code(Code.INVALID_ARGUMENT, server.stub.LoadModel, options(model, PipelineType="NoSuchPipeline"))
    expect_code(Code.INVALID_ARGUMENT, server.stub.LoadModel, options(model, SchedulerType="NoSuchScheduler"))
    assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED
    assert_healthy(server.stub)


def test_bad_model_files_answer_clearly(server, tmp_path) -> None:
    assert_bad_models_answer_clearly(server.stub, tmp_path, file_name="model.safetensors")


def test_second_load_while_one_is_in_flight_is_aborted(server, model, tmp_path) -> None:
    second_load_is_aborted(
        server.stub,
        options(model),
        model_rpc=lambda: server.stub.GenerateImage(image_request(tmp_path / "busy.png"), timeout=120),
    )
    assert_healthy(server.stub)


@pytest.fixture(scope="module")
def loaded(server, model):
    # Default pipeline class: AutoPipelineForText2Image picks StableDiffusionPipeline from model_index.json.
    res = server.stub.LoadModel(options(model), timeout=300)
    assert res.success, res.message
    return server


@pytest.mark.parametrize("width,height", [(64, 48), (32, 96)])
def test_generate_image_writes_png_of_requested_size(loaded, tmp_path, width, height) -> None:
    from PIL import Image

    dst = tmp_path / "out.png"
    res = loaded.stub.GenerateImage(image_request(dst, width=width, height=height), timeout=300)
    assert res.success, res.message
    with Image.open(dst) as im:
        assert im.format == "PNG"
        assert im.size == (width, height)
        assert im.mode == "RGB"


def test_same_seed_gives_the_same_image(loaded, tmp_path) -> None:
    from PIL import Image

    digests = []
    for name, seed in (("a.png", 42), ("b.png", 42), ("c.png", 43)):
        loaded.stub.GenerateImage(image_request(tmp_path / name, seed=seed), timeout=300)
        with Image.open(tmp_path / name) as im:
            digests.append(hashlib.sha256(im.tobytes()).hexdigest())
    assert digests[0] == digests[1]
    assert digests[0] != digests[2]


def test_negative_prompt_and_scheduler_are_accepted(server, model, tmp_path) -> None:
    res = server.stub.LoadModel(options(model, SchedulerType="EulerDiscreteScheduler", CFGScale=3.0), timeout=300)
    assert res.success, res.message
    dst = tmp_path / "neg.png"
    assert server.stub.GenerateImage(image_request(dst, negative_prompt="blurry"), timeout=300).success
    assert dst.stat().st_size > 0


@pytest.mark.parametrize(
    "fields",
    [
        dict(width=0),
        dict(height=0),
        dict(width=100000),
        dict(height=100000),
        dict(width=63),
        dict(width=-8),
        dict(positive_prompt=""),
        dict(step=-1),
        dict(dst=""),
    ],
    ids=["width0", "height0", "width100000", "height100000", "width63", "width-8", "empty-prompt", "step-1", "no-dst"],
)
def test_bad_requests_are_invalid_argument(loaded, tmp_path, fields) -> None:
    dst = tmp_path / "bad.png"
    fields = {"dst": str(dst), **fields}
    expect_code(Code.INVALID_ARGUMENT, loaded.stub.GenerateImage, image_request(**fields))
    assert not dst.exists()
    assert_healthy(loaded.stub)


def test_missing_output_dir_or_source_image_is_not_found(loaded, tmp_path) -> None:
    expect_code(Code.NOT_FOUND, loaded.stub.GenerateImage, image_request(tmp_path / "no" / "dir" / "o.png"))
    expect_code(Code.NOT_FOUND, loaded.stub.GenerateImage, image_request(tmp_path / "o.png", src=str(tmp_path / "x.png")))
    assert_healthy(loaded.stub)
    # Still serving after the errors.
    assert loaded.stub.GenerateImage(image_request(tmp_path / "ok.png"), timeout=300).success


@pytest.fixture(scope="module")
def single_file(model):
    """The tiny pipeline as one original-layout checkpoint, as civitai and the Hub ship SD models."""
    return ldm_checkpoint(model, model.parent / "tiny-sd.safetensors")


def test_single_file_checkpoint_loads_and_generates(server, model, single_file, tmp_path) -> None:
    """No PipelineType: StableDiffusionPipeline.from_single_file (the Auto classes cannot read one
    file); option config: names the diffusers folder of its configs, which offline cannot come
    from the Hub."""
    opts = backend_pb2.ModelOptions(Model=single_file.name, ModelPath=str(single_file.parent), Options=[f"config:{model.name}"])
    res = server.stub.LoadModel(opts, timeout=300)
    assert res.success, res.message
    assert server.stub.GenerateImage(image_request(tmp_path / "single.png"), timeout=300).success
    from PIL import Image

    with Image.open(tmp_path / "single.png") as im:
        assert im.size == (64, 48)
    explicit = backend_pb2.ModelOptions(Model=str(single_file), PipelineType="StableDiffusionPipeline", Options=[f"config:{model}"])
    assert server.stub.LoadModel(explicit, timeout=300).success


def test_single_file_without_its_configs_or_with_an_auto_class_is_refused_naming_it(server, single_file) -> None:
    err = expect_code(Code.FAILED_PRECONDITION, server.stub.LoadModel, backend_pb2.ModelOptions(Model=str(single_file)), timeout=300)
    assert str(single_file) in err.details() and "config:<folder>" in err.details(), err.details()
    err = expect_code(
        Code.INVALID_ARGUMENT, server.stub.LoadModel,
        backend_pb2.ModelOptions(Model=str(single_file), PipelineType="AutoPipelineForText2Image"),
    )
    assert str(single_file) in err.details() and "StableDiffusionPipeline" in err.details(), err.details()
    assert state(server.stub) == backend_pb2.StatusResponse.UNINITIALIZED
    assert_healthy(server.stub)
