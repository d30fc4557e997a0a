"""llama-cpp's binding.py on a fake libllama (the functions its signature table declares, by name):
the sampler chain IgnoreEOS builds. The real library is exercised by tests/integration:llama-cpp."""
import ctypes
import math

import pytest

from backends.common.testing import load_backend_module

binding = load_backend_module(__file__, "binding")

GREEDY = dict(temperature=0, top_k=0, top_p=0, min_p=0, typical_p=0, repeat_last_n=64, repeat_penalty=1.0,
              frequency_penalty=0, presence_penalty=0, seed=1)


class FakeLib:
    """Records the sampler chain: each llama_sampler_init_* returns a tuple naming it."""

    def __init__(self, n_vocab=10, eog=(2, 7), bias_fails=False):
        self.n_vocab, self.eog, self.bias_fails = n_vocab, set(eog), bias_fails
        self.is_eog_calls, self.chain, self.freed = 0, [], []

    # Model.__init__
    def llama_model_get_vocab(self, handle):
        return "vocab"

    def llama_vocab_n_tokens(self, vocab):
        return self.n_vocab

    def llama_model_n_ctx_train(self, handle):
        return 128

    def llama_model_n_embd(self, handle):
        return 16

    def llama_model_has_encoder(self, handle):
        return False

    def llama_model_desc(self, handle, buf, size):
        buf.value = b"fake"
        return 4

    def llama_vocab_is_eog(self, vocab, token):
        assert vocab == "vocab" and 0 <= token < self.n_vocab
        self.is_eog_calls += 1
        return token in self.eog

    # the sampler chain
    def llama_sampler_chain_default_params(self):
        return binding.SamplerChainParams()

    def llama_sampler_chain_init(self, params):
        return "chain"

    def llama_sampler_chain_add(self, chain, sampler):
        assert chain == "chain" and sampler
        self.chain.append(sampler)

    def llama_sampler_free(self, handle):
        self.freed.append(handle)

    def llama_sampler_init_logit_bias(self, n_vocab, n, biases):
        if self.bias_fails:
            return None
        return ("logit_bias", n_vocab, tuple((biases[i].token, biases[i].bias) for i in range(n)))

    def llama_sampler_init_grammar(self, vocab, grammar, root):
        return ("grammar", grammar, root)

    def llama_sampler_init_greedy(self):
        return ("greedy",)

    def llama_sampler_init_top_k(self, k):
        return ("top_k", k)

    def llama_sampler_init_temp(self, t):
        return ("temp", t)

    def llama_sampler_init_dist(self, seed):
        return ("dist", seed)


class FakeLibrary:
    def __init__(self, lib):
        self.lib = lib

    def take_errors(self):
        return ""


def model(**kw):
    lib = FakeLib(**kw)
    return binding.Model(FakeLibrary(lib), "model"), lib


def test_ignore_eos_masks_every_eog_token_first_in_the_chain():
    m, lib = model()
    binding.Sampler(m, **GREEDY, ignore_eos=True)
    assert lib.chain == [("logit_bias", 10, ((2, binding.EOG_BIAS), (7, binding.EOG_BIAS))), ("greedy",)]


def test_the_mask_comes_before_the_grammar_and_the_draw():
    m, lib = model()
    binding.Sampler(m, **{**GREEDY, "temperature": 0.8, "top_k": 40}, grammar='root ::= "a"', ignore_eos=True)
    assert [s[0] for s in lib.chain] == ["logit_bias", "grammar", "top_k", "temp", "dist"]


def test_no_mask_without_ignore_eos_and_no_vocabulary_scan():
    m, lib = model()
    binding.Sampler(m, **GREEDY)
    assert lib.chain == [("greedy",)] and lib.is_eog_calls == 0


def test_eog_tokens_are_enumerated_once_per_model():
    m, lib = model(n_vocab=50, eog=(0, 49))
    for _ in range(3):
        binding.Sampler(m, **GREEDY, ignore_eos=True)
    assert m.eog_tokens == (0, 49) and lib.is_eog_calls == 50
    assert [s[2] for s in lib.chain if s[0] == "logit_bias"] == [((0, binding.EOG_BIAS), (49, binding.EOG_BIAS))] * 3


def test_a_vocabulary_without_eog_tokens_gets_no_mask():
    m, lib = model(eog=())
    binding.Sampler(m, **GREEDY, ignore_eos=True)
    assert lib.chain == [("greedy",)]


def test_a_failed_bias_sampler_is_named_and_the_chain_freed():
    m, lib = model(bias_fails=True)
    with pytest.raises(binding.LlamaError, match=r"logit_bias.*2 end-of-generation tokens \(IgnoreEOS\)"):
        binding.Sampler(m, **GREEDY, ignore_eos=True)
    assert lib.freed == ["chain"] and lib.chain == []


def test_logit_bias_array_is_llamas_struct():
    arr = binding.logit_bias_array([(3, -1.5), (9, binding.EOG_BIAS)])
    assert ctypes.sizeof(binding.LogitBias) == 8 and len(arr) == 2
    assert [(b.token, b.bias) for b in arr] == [(3, -1.5), (9, pytest.approx(binding.EOG_BIAS))]


def test_the_bias_is_finite_in_float32_and_zeroes_an_eog_probability():
    stored = binding.logit_bias_array([(0, binding.EOG_BIAS)])[0].bias
    assert math.isfinite(stored)
    # Even with the EOG token's own logit at +1e4 and the best other token's at -1e4 (far beyond a
    # real model's), its softmax weight exp(biased - best) underflows to exactly 0, as with -inf.
    biased = ctypes.c_float(1.0e4 + stored).value
    assert math.exp(biased - (-1.0e4)) == 0.0
