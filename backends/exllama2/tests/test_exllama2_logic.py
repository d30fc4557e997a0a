"""exllama2's own logic: config from ModelOptions, sampler settings from PredictOptions, stop
conditions, truncation, streaming and validation. ExLlamaV2 is faked at its API boundary
(``exllamav2`` config/model/cache/tokenizer and ``exllamav2.generator``); the servicer is real."""
import sys
import types

import grpc
import pytest

from backends.common.testing import AbortError, FakeContext, load_backend_module
from backends.proto import backend_pb2

backend = load_backend_module(__file__)


class Settings:
    def __init__(self):
        self.temperature, self.top_p, self.top_k, self.min_p, self.token_repetition_penalty = 0.8, 0.8, 50, 0.0, 1.025


class Generator:
    def __init__(self, model, cache, tokenizer):
        self.jobs, self.cleared = [], False

    def generate(self, **kwargs):
        self.kwargs = kwargs
        return "Paris. STOP and more"

    def enqueue(self, job):
        self.jobs.append(job)

    def num_remaining_jobs(self):
        return len(self.jobs)

    def iterate(self):
        self.jobs.pop()
        return [{"text": "Par"}, {"text": ""}, {"text": "is"}]

    def clear_queue(self):
        self.cleared = True


@pytest.fixture
def fake_exllama(monkeypatch):
    seen = {}

    class Config:
        def __init__(self, path):
            seen["config_path"] = path
            self.max_seq_len = 4096

    class Model:
        def __init__(self, config):
            self.config = config

        def load_autosplit(self, cache):
            seen["cache_len"] = cache.max_seq_len

    class Cache:
        def __init__(self, model, lazy, max_seq_len):
            self.max_seq_len = max_seq_len

    class Tokenizer:
        eos_token_id = 2

        def __init__(self, config):
            pass

        def encode(self, text, add_bos):
            seen["encoded"] = (text, add_bos)
            return [1, 5, 6]

    class Job:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    exl = types.ModuleType("exllamav2")
    exl.ExLlamaV2, exl.ExLlamaV2Cache, exl.ExLlamaV2Config, exl.ExLlamaV2Tokenizer = Model, Cache, Config, Tokenizer
    gen = types.ModuleType("exllamav2.generator")
    gen.ExLlamaV2DynamicGenerator, gen.ExLlamaV2DynamicJob = Generator, Job
    gen.ExLlamaV2Sampler = types.SimpleNamespace(Settings=Settings)
    exl.generator = gen
    monkeypatch.setitem(sys.modules, "exllamav2", exl)
    monkeypatch.setitem(sys.modules, "exllamav2.generator", gen)
    return seen


def loaded(tmp_path, **options):
    s = backend.ExLlamaV2Servicer()
    assert s.LoadModel(backend_pb2.ModelOptions(Model=str(tmp_path), **options), FakeContext()).success
    return s


def test_context_size_sets_the_sequence_length_and_the_cache(fake_exllama, tmp_path):
    loaded(tmp_path, ContextSize=2048)
    assert fake_exllama == {"config_path": str(tmp_path), "cache_len": 2048}
    loaded(tmp_path)
    assert fake_exllama["cache_len"] == 4096  # the model's own


def test_sampler_settings_map_only_what_was_given(fake_exllama, tmp_path):
    s = loaded(tmp_path)
    st = s._settings(backend_pb2.PredictOptions(Temperature=0.2, TopK=5, Penalty=1.1))
    assert (st.temperature, st.top_p, st.top_k, st.min_p, st.token_repetition_penalty) == (
        pytest.approx(0.2), 0.8, 5, 0.0, pytest.approx(1.1)
    )


def test_predict_passes_stops_and_seed_and_truncates_at_the_stop(fake_exllama, tmp_path):
    s = loaded(tmp_path)
    reply = s.Predict(backend_pb2.PredictOptions(Prompt="Capital?", Tokens=7, StopPrompts=["STOP", ""], Seed=3), FakeContext())
    assert reply.message == b"Paris. "
    kw = s.generator.kwargs
    assert kw["prompt"] == "Capital?" and kw["max_new_tokens"] == 7 and kw["seed"] == 3
    assert kw["stop_conditions"] == ["STOP", 2] and kw["completion_only"] is True


def test_predict_defaults_and_chat_messages(fake_exllama, tmp_path):
    s = loaded(tmp_path)
    msgs = [backend_pb2.Message(role="user", content="hi")]
    s.Predict(backend_pb2.PredictOptions(UseTokenizerTemplate=True, Messages=msgs), FakeContext())
    assert s.generator.kwargs["prompt"] == "user: hi\nassistant:"
    assert s.generator.kwargs["max_new_tokens"] == backend.DEFAULT_MAX_TOKENS and s.generator.kwargs["seed"] is None


def test_stream_yields_each_non_empty_piece_and_clears_the_queue(fake_exllama, tmp_path):
    s = loaded(tmp_path)
    out = list(s.PredictStream(backend_pb2.PredictOptions(Prompt="Capital?", Tokens=4), FakeContext()))
    assert [r.message for r in out] == [b"Par", b"is"]
    assert s.generator.cleared and fake_exllama["encoded"] == ("Capital?", True)


@pytest.mark.parametrize("options", [dict(Prompt=""), dict(Prompt="x", TopP=1.5), dict(Prompt="x", Temperature=-1)])
def test_invalid_options_are_invalid_argument_before_generation(fake_exllama, tmp_path, options):
    s = loaded(tmp_path)
    for rpc in (s.Predict, lambda r, c: list(s.PredictStream(r, c))):
        with pytest.raises(AbortError) as e:
            rpc(backend_pb2.PredictOptions(**options), FakeContext())
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert not hasattr(s.generator, "kwargs") and s.generator.jobs == []


def test_predict_before_load_is_failed_precondition(fake_exllama):
    with pytest.raises(AbortError) as e:
        backend.ExLlamaV2Servicer().Predict(backend_pb2.PredictOptions(Prompt="x"), FakeContext())
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
