import pytest

from backends.common.errors import InvalidArgument, NotFound
from backends.common.testing import load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


def req(tmp_path, **kw):
    base = dict(positive_prompt="a cat", width=64, height=64, dst=str(tmp_path / "o.png"))
    base.update(kw)
    return backend_pb2.GenerateImageRequest(**base)


def test_valid_request_passes(tmp_path):
    backend.validate_image_request(req(tmp_path))


@pytest.mark.parametrize("kw,match", [
    ({"width": 0}, "width"), ({"height": 4104}, "height"), ({"width": 60}, "multiple of 8"),
    ({"positive_prompt": ""}, "positive_prompt"), ({"dst": ""}, "dst"), ({"step": -1}, "step"),
])
def test_invalid_requests(tmp_path, kw, match):
    with pytest.raises(InvalidArgument, match=match):
        backend.validate_image_request(req(tmp_path, **kw))


def test_missing_output_dir_and_src(tmp_path):
    with pytest.raises(NotFound):
        backend.validate_image_request(req(tmp_path, dst=str(tmp_path / "no" / "o.png")))
    with pytest.raises(NotFound, match="src"):
        backend.validate_image_request(req(tmp_path, src=str(tmp_path / "in.png")))


def test_single_file_loads_through_a_concrete_pipeline_class():
    opts = backend_pb2.ModelOptions
    assert backend.pipeline_class_name(opts(), single_file=True) == "StableDiffusionPipeline"
    assert backend.pipeline_class_name(opts(IMG2IMG=True), single_file=True) == "StableDiffusionImg2ImgPipeline"
    assert backend.pipeline_class_name(opts(), single_file=False) == "AutoPipelineForText2Image"
    assert backend.pipeline_class_name(opts(PipelineType="StableDiffusionXLPipeline"), single_file=True) == "StableDiffusionXLPipeline"


def test_an_auto_class_cannot_load_a_single_file(tmp_path):
    class AutoPipelineForText2Image:  # the diffusers Auto classes have from_pretrained only
        pass

    with pytest.raises(InvalidArgument, match=r"AutoPipelineForText2Image cannot load the single-file checkpoint .*m.safetensors"):
        backend.load_single_file(AutoPipelineForText2Image, str(tmp_path / "m.safetensors"), None, {})


def test_option_config_names_a_diffusers_folder_relative_to_model_path(tmp_path):
    (tmp_path / "cfg").mkdir()
    ckpt = str(tmp_path / "m.safetensors")
    assert backend.single_file_config(backend_pb2.ModelOptions(), ckpt) is None
    with pytest.raises(InvalidArgument, match=r"cfg has no model_index.json"):
        backend.single_file_config(backend_pb2.ModelOptions(Options=["config:cfg"], ModelPath=str(tmp_path)), ckpt)
    (tmp_path / "cfg" / "model_index.json").write_text("{}")
    assert backend.single_file_config(backend_pb2.ModelOptions(Options=["config:cfg"], ModelPath=str(tmp_path)), ckpt) == str(tmp_path / "cfg")
    with pytest.raises(NotFound, match="nope"):
        backend.single_file_config(backend_pb2.ModelOptions(Options=[f"config:{tmp_path / 'nope'}"]), ckpt)
