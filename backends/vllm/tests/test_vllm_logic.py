"""vllm's own logic: engine arguments from ModelOptions, sampling parameters from
PredictOptions, reply mapping and validation. vLLM is faked at its API boundary (``vllm.LLM``
with ``get_tokenizer``/``generate`` and ``vllm.SamplingParams``); the servicer is real."""
import sys
import types

import grpc
import pytest

from backends.common.errors import InvalidArgument
from backends.common.testing import AbortError, FakeContext, load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


def test_engine_kwargs_map_the_given_options_only():
    kw = backend.engine_kwargs(
        backend_pb2.ModelOptions(
            TrustRemoteCode=True, Quantization="awq", GPUMemoryUtilization=0.5, MaxModelLen=512, DType="bfloat16",
            TensorParallelSize=2, Seed=7, EngineArgs='{"max_num_seqs": 4, "enforce_eager": true}',
        )
    )
    assert kw == {
        "model": None, "trust_remote_code": True, "enforce_eager": True, "quantization": "awq",
        "gpu_memory_utilization": 0.5, "max_model_len": 512, "tensor_parallel_size": 2, "dtype": "bfloat16",
        "seed": 7, "max_num_seqs": 4,
    }
    assert backend.engine_kwargs(backend_pb2.ModelOptions()) == {"model": None, "trust_remote_code": False, "enforce_eager": False}


@pytest.mark.parametrize("engine_args, message", [("{nope", "not valid JSON"), ("[1, 2]", "must be a JSON object")])
def test_bad_engine_args_are_invalid_argument(engine_args, message):
    with pytest.raises(InvalidArgument, match=message):
        backend.engine_kwargs(backend_pb2.ModelOptions(EngineArgs=engine_args))


def test_sampling_kwargs():
    kw = backend.sampling_kwargs(
        backend_pb2.PredictOptions(Tokens=9, Temperature=0.5, TopK=3, PresencePenalty=0.25, StopPrompts=["</s>", ""], Seed=2)
    )
    assert kw == {"max_tokens": 9, "temperature": 0.5, "top_k": 3, "presence_penalty": 0.25, "stop": ["</s>"], "seed": 2}
    assert backend.sampling_kwargs(backend_pb2.PredictOptions())["max_tokens"] == backend.DEFAULT_MAX_TOKENS


@pytest.fixture
def fake_vllm(monkeypatch):
    seen = {}

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class Tokenizer:
        chat_template = "{{ messages }}"

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return f"<chat {messages[0]['content']}>"

    class LLM:
        def __init__(self, **kwargs):
            seen["engine"] = kwargs

        def get_tokenizer(self):
            return Tokenizer()

        def generate(self, prompts, params, use_tqdm):
            seen["prompts"], seen["sampling"] = prompts, params.kwargs
            completion = types.SimpleNamespace(text="four</s>junk", token_ids=[4, 5, 6])
            return [types.SimpleNamespace(outputs=[completion], prompt_token_ids=[1, 2])]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    return seen


def loaded(tmp_path, **options):
    s = backend.VLLMServicer()
    assert s.LoadModel(backend_pb2.ModelOptions(Model=str(tmp_path), **options), FakeContext()).success
    return s


def test_load_gives_vllm_the_resolved_path_and_engine_args(fake_vllm, tmp_path):
    loaded(tmp_path, MaxModelLen=256, EnforceEager=True)
    assert fake_vllm["engine"] == {"model": str(tmp_path), "trust_remote_code": False, "enforce_eager": True, "max_model_len": 256}


def test_bad_engine_args_fail_load_with_invalid_argument(fake_vllm, tmp_path):
    s = backend.VLLMServicer()
    with pytest.raises(AbortError) as e:
        s.LoadModel(backend_pb2.ModelOptions(Model=str(tmp_path), EngineArgs="{"), FakeContext())
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "engine" not in fake_vllm


def test_predict_maps_text_token_counts_and_stops(fake_vllm, tmp_path):
    s = loaded(tmp_path)
    r = s.Predict(backend_pb2.PredictOptions(Prompt="2+2=", Tokens=5, StopPrompts=["</s>"]), FakeContext())
    assert (r.message, r.tokens, r.prompt_tokens) == (b"four", 3, 2)
    assert fake_vllm["prompts"] == ["2+2="] and fake_vllm["sampling"]["stop"] == ["</s>"]


def test_chat_messages_use_the_tokenizer_template(fake_vllm, tmp_path):
    s = loaded(tmp_path)
    msgs = [backend_pb2.Message(role="user", content="hello")]
    s.Predict(backend_pb2.PredictOptions(UseTokenizerTemplate=True, Messages=msgs), FakeContext())
    assert fake_vllm["prompts"] == ["<chat hello>"]


def test_stream_sends_the_whole_completion_once(fake_vllm, tmp_path):
    s = loaded(tmp_path)
    out = list(s.PredictStream(backend_pb2.PredictOptions(Prompt="2+2=", StopPrompts=["</s>"]), FakeContext()))
    assert [r.message for r in out] == [b"four"]


def test_empty_prompt_is_invalid_argument_and_reaches_no_engine(fake_vllm, tmp_path):
    s = loaded(tmp_path)
    with pytest.raises(AbortError) as e:
        s.Predict(backend_pb2.PredictOptions(Prompt=""), FakeContext())
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "prompts" not in fake_vllm
