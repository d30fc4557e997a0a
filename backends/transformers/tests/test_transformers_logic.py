import pytest

from backends.common.errors import InvalidArgument
from backends.common.testing import load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


def test_empty_prompt_is_invalid():
    with pytest.raises(InvalidArgument, match="Prompt is empty"):
        backend.validate_predict(backend_pb2.PredictOptions())


def test_messages_with_template_count_as_prompt():
    req = backend_pb2.PredictOptions(UseTokenizerTemplate=True, Messages=[backend_pb2.Message(role="user", content="hi")])
    backend.validate_predict(req)
    assert backend.build_prompt(req).startswith("user: hi")


@pytest.mark.parametrize("field,value", [("Tokens", -1), ("Temperature", -0.5), ("TopP", 1.5), ("TopK", -2)])
def test_out_of_range_sampling_is_invalid(field, value):
    req = backend_pb2.PredictOptions(Prompt="x", **{field: value})
    with pytest.raises(InvalidArgument, match=field):
        backend.validate_predict(req)


def test_generation_kwargs_greedy_and_sampling():
    assert backend.generation_kwargs(backend_pb2.PredictOptions(Prompt="x")) == {
        "max_new_tokens": 512, "do_sample": False}  # LocalAI-style default
    kw = backend.generation_kwargs(backend_pb2.PredictOptions(Prompt="x", Tokens=5, Temperature=0.7, TopP=0.9, TopK=40))
    assert kw == {"max_new_tokens": 5, "do_sample": True, "temperature": pytest.approx(0.7), "top_p": pytest.approx(0.9), "top_k": 40}


def test_ignore_eos_generates_all_requested_tokens():
    kw = backend.generation_kwargs(backend_pb2.PredictOptions(Prompt="x", Tokens=7, IgnoreEOS=True))
    assert kw["min_new_tokens"] == kw["max_new_tokens"] == 7


def test_truncate_at_stop():
    assert backend.truncate_at_stop("abc STOP def", ["STOP"]) == "abc "
    assert backend.truncate_at_stop("abc", ["", "zz"]) == "abc"
