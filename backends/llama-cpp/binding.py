"""ctypes binding of llama.cpp's C API (include/llama.h of the pinned llama_cpp_python 0.3.36 sdist,
built by engines/llama-cpp), standard library only.

The three parameter structs passed by value are declared field for field from the pinned header;
`Library.check_abi()` compares what llama.cpp's own *_default_params functions return with the
values its sources set (src/llama-model.cpp, src/llama-context.cpp), at fields spread over each
struct up to the last one, so a header that drifted from these declarations fails at load time
instead of silently shifting parameters.

Only what the backend uses is bound: model and context lifetime, tokenizer, llama_decode on a
multi-sequence batch, the memory (KV cache) API per sequence, embeddings and the sampler chain.

IgnoreEOS is the sampler's, as in llama.cpp's common sampling (`ignore_eos`: a logit bias on every
end-of-generation token of the vocabulary): `Sampler(ignore_eos=True)` puts EOG_BIAS on each of the
model's EOG tokens at the head of the chain, so no EOG token is picked, streamed or fed back while
any other token is possible.
"""
from __future__ import annotations

import ctypes
import functools
import threading

c_bool, c_int32, c_uint32, c_int8, c_float, c_char_p, c_void_p, c_size_t, c_uint64 = (
    ctypes.c_bool, ctypes.c_int32, ctypes.c_uint32, ctypes.c_int8, ctypes.c_float, ctypes.c_char_p,
    ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64)
c_enum = ctypes.c_int
llama_token = llama_pos = llama_seq_id = c_int32

LLAMA_DEFAULT_SEED = 0xFFFFFFFF
# enum llama_load_mode
LOAD_NONE, LOAD_MMAP, LOAD_MLOCK, LOAD_MMAP_MLOCK = 0, 1, 2, 3
# enum llama_pooling_type
POOLING_NONE, POOLING_MEAN = 0, 1
# enum llama_flash_attn_type
FLASH_ATTN = {"auto": -1, "off": 0, "false": 0, "disabled": 0, "on": 1, "true": 1, "enabled": 1}
# enum ggml_type (ggml.h) of the KV cache types LocalAI's CacheTypeKey/CacheTypeValue name.
KV_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "bf16": 30}
GGML_LOG_LEVEL_ERROR = 4
# The logit bias IgnoreEOS puts on every end-of-generation token. llama.cpp's common sampling uses
# -INFINITY; a finite bias far below any real logit masks them the same way (their probability is
# exactly 0 in float32 whenever another token has a finite logit) but, unlike -inf, keeps one
# candidate when a grammar allows nothing but the end: with every logit at -inf the chain would
# pick a token the grammar refuses, and llama.cpp's grammar sampler throws (the process aborts).
# That EOG token then ends the generation (batching.py): nothing else could follow it.
EOG_BIAS = -1.0e9


class ModelParams(ctypes.Structure):
    _fields_ = [
        ("devices", c_void_p), ("tensor_buft_overrides", c_void_p), ("n_gpu_layers", c_int32),
        ("split_mode", c_enum), ("load_mode", c_enum), ("lazy_mode", c_enum), ("main_gpu", c_int32),
        ("tensor_split", c_void_p), ("progress_callback", c_void_p), ("progress_callback_user_data", c_void_p),
        ("kv_overrides", c_void_p), ("vocab_only", c_bool), ("check_tensors", c_bool),
        ("use_extra_bufts", c_bool), ("no_host", c_bool), ("no_alloc", c_bool), ("load_mtp", c_bool),
    ]


class ContextParams(ctypes.Structure):
    _fields_ = [
        ("n_ctx", c_uint32), ("n_batch", c_uint32), ("n_ubatch", c_uint32), ("n_seq_max", c_uint32),
        ("n_rs_seq", c_uint32), ("n_outputs_max", c_uint32), ("n_outputs_max_per_seq", c_uint32),
        ("n_threads", c_int32), ("n_threads_batch", c_int32),
        ("ctx_type", c_enum), ("rope_scaling_type", c_enum), ("pooling_type", c_enum), ("attention_type", c_enum),
        ("flash_attn_type", c_enum),
        ("rope_freq_base", c_float), ("rope_freq_scale", c_float), ("yarn_ext_factor", c_float),
        ("yarn_attn_factor", c_float), ("yarn_beta_fast", c_float), ("yarn_beta_slow", c_float),
        ("yarn_orig_ctx", c_uint32), ("defrag_thold", c_float),
        ("cb_eval", c_void_p), ("cb_eval_user_data", c_void_p), ("type_k", c_enum), ("type_v", c_enum),
        ("abort_callback", c_void_p), ("abort_callback_data", c_void_p),
        ("embeddings", c_bool), ("offload_kqv", c_bool), ("no_perf", c_bool), ("op_offload", c_bool),
        ("swa_full", c_bool), ("kv_unified", c_bool),
        ("samplers", c_void_p), ("n_samplers", c_size_t), ("ctx_other", c_void_p),
    ]


class SamplerChainParams(ctypes.Structure):
    _fields_ = [("no_perf", c_bool)]


class LogitBias(ctypes.Structure):
    """struct llama_logit_bias, an array of which llama_sampler_init_logit_bias copies."""
    _fields_ = [("token", llama_token), ("bias", c_float)]


class Batch(ctypes.Structure):
    _fields_ = [
        ("n_tokens", c_int32), ("token", ctypes.POINTER(llama_token)), ("embd", ctypes.POINTER(c_float)),
        ("pos", ctypes.POINTER(llama_pos)), ("n_seq_id", ctypes.POINTER(c_int32)),
        ("seq_id", ctypes.POINTER(ctypes.POINTER(llama_seq_id))), ("logits", ctypes.POINTER(c_int8)),
    ]


_LOG_CALLBACK = ctypes.CFUNCTYPE(None, c_enum, c_char_p, c_void_p)
P = c_void_p
_SIGNATURES = {
    "llama_backend_init": ([], None),
    "llama_log_set": ([_LOG_CALLBACK, P], None),
    "llama_model_default_params": ([], ModelParams),
    "llama_context_default_params": ([], ContextParams),
    "llama_sampler_chain_default_params": ([], SamplerChainParams),
    "llama_model_load_from_file": ([c_char_p, ModelParams], P),
    "llama_model_free": ([P], None),
    "llama_model_get_vocab": ([P], P),
    "llama_model_n_ctx_train": ([P], c_int32),
    "llama_model_n_embd": ([P], c_int32),
    "llama_model_size": ([P], c_uint64),
    "llama_model_n_params": ([P], c_uint64),
    "llama_model_has_encoder": ([P], c_bool),
    "llama_model_desc": ([P, c_char_p, c_size_t], c_int32),
    "llama_init_from_model": ([P, ContextParams], P),
    "llama_free": ([P], None),
    "llama_n_ctx": ([P], c_uint32),
    "llama_n_ctx_seq": ([P], c_uint32),
    "llama_n_batch": ([P], c_uint32),
    "llama_n_seq_max": ([P], c_uint32),
    "llama_get_memory": ([P], P),
    "llama_memory_clear": ([P, c_bool], None),
    "llama_memory_seq_rm": ([P, llama_seq_id, llama_pos, llama_pos], c_bool),
    "llama_memory_seq_pos_max": ([P, llama_seq_id], llama_pos),
    "llama_batch_init": ([c_int32, c_int32, c_int32], Batch),
    "llama_batch_free": ([Batch], None),
    "llama_decode": ([P, Batch], c_int32),
    "llama_get_embeddings_seq": ([P, llama_seq_id], ctypes.POINTER(c_float)),
    "llama_vocab_n_tokens": ([P], c_int32),
    "llama_vocab_is_eog": ([P, llama_token], c_bool),
    "llama_vocab_bos": ([P], llama_token),
    "llama_vocab_eos": ([P], llama_token),
    "llama_tokenize": ([P, c_char_p, c_int32, ctypes.POINTER(llama_token), c_int32, c_bool, c_bool], c_int32),
    "llama_token_to_piece": ([P, llama_token, c_char_p, c_int32, c_int32, c_bool], c_int32),
    "llama_detokenize": ([P, ctypes.POINTER(llama_token), c_int32, c_char_p, c_int32, c_bool, c_bool], c_int32),
    "llama_sampler_chain_init": ([SamplerChainParams], P),
    "llama_sampler_chain_add": ([P, P], None),
    "llama_sampler_free": ([P], None),
    "llama_sampler_sample": ([P, P, c_int32], llama_token),
    "llama_sampler_init_greedy": ([], P),
    "llama_sampler_init_dist": ([c_uint32], P),
    "llama_sampler_init_top_k": ([c_int32], P),
    "llama_sampler_init_top_p": ([c_float, c_size_t], P),
    "llama_sampler_init_min_p": ([c_float, c_size_t], P),
    "llama_sampler_init_typical": ([c_float, c_size_t], P),
    "llama_sampler_init_temp": ([c_float], P),
    "llama_sampler_init_penalties": ([c_int32, c_int32, c_float, c_float, c_float], P),
    "llama_sampler_init_grammar": ([P, c_char_p, c_char_p], P),
    "llama_sampler_init_logit_bias": ([c_int32, c_int32, ctypes.POINTER(LogitBias)], P),
    "llama_print_system_info": ([], c_char_p),
    "llama_version": ([], c_char_p),
}


class LlamaError(Exception):
    pass


class GrammarError(LlamaError):
    """llama.cpp refused the GBNF grammar of a sampler (the request's fault, not the engine's)."""


class Library:
    """libllama.so loaded once per process; llama.cpp's log goes to a ring the errors quote."""

    def __init__(self, path, verbose: bool = False):
        self.path = str(path)
        self.lib = ctypes.CDLL(self.path)
        for name, (argtypes, restype) in _SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.argtypes, fn.restype = argtypes, restype
        self._verbose = verbose
        self._log_lock = threading.Lock()
        self._log: list[str] = []
        self._log_cb = _LOG_CALLBACK(self._on_log)  # kept alive: llama.cpp holds the pointer
        self.lib.llama_log_set(self._log_cb, None)
        self.lib.llama_backend_init()
        self.check_abi()

    def _on_log(self, level, text, _user):
        line = (text or b"").decode("utf-8", "replace")
        if self._verbose:
            import sys

            sys.stderr.write(line)
        if level >= GGML_LOG_LEVEL_ERROR:
            with self._log_lock:
                self._log = (self._log + [line.strip()])[-8:]

    def take_errors(self) -> str:
        """llama.cpp's error lines since the last call (what a failed call logged), joined."""
        with self._log_lock:
            lines, self._log = self._log, []
        return "; ".join(line for line in lines if line)

    def check_abi(self) -> None:
        m = self.lib.llama_model_default_params()
        c = self.lib.llama_context_default_params()
        expected = [
            ("llama_model_params.n_gpu_layers", m.n_gpu_layers, -1), ("split_mode", m.split_mode, 1),
            ("load_mode", m.load_mode, -1), ("lazy_mode", m.lazy_mode, 1), ("kv_overrides", m.kv_overrides, None),
            ("use_extra_bufts", m.use_extra_bufts, True), ("load_mtp", m.load_mtp, False),
            ("llama_context_params.n_ctx", c.n_ctx, 512), ("n_batch", c.n_batch, 2048), ("n_ubatch", c.n_ubatch, 512),
            ("n_seq_max", c.n_seq_max, 1), ("n_outputs_max_per_seq", c.n_outputs_max_per_seq, 1),
            ("n_threads", c.n_threads, 4), ("flash_attn_type", c.flash_attn_type, -1),
            ("yarn_ext_factor", c.yarn_ext_factor, -1.0), ("defrag_thold", c.defrag_thold, -1.0),
            ("type_k", c.type_k, 1), ("type_v", c.type_v, 1), ("offload_kqv", c.offload_kqv, True),
            ("no_perf", c.no_perf, True), ("swa_full", c.swa_full, True), ("kv_unified", c.kv_unified, False),
            ("n_samplers", c.n_samplers, 0), ("ctx_other", c.ctx_other, None),
        ]
        wrong = [f"{name}={got!r} (expected {want!r})" for name, got, want in expected if got != want]
        if wrong:
            raise LlamaError(f"{self.path}: llama.h's structs do not match this binding's declarations: "
                             f"{', '.join(wrong)}; update backends/llama-cpp/binding.py from the pinned header")

    def load_model(self, path: str, *, mmap: bool = True, mlock: bool = False) -> "Model":
        params = self.lib.llama_model_default_params()
        params.n_gpu_layers = 0
        params.load_mode = {(True, False): LOAD_MMAP, (True, True): LOAD_MMAP_MLOCK,
                            (False, True): LOAD_MLOCK, (False, False): LOAD_NONE}[(bool(mmap), bool(mlock))]
        self.take_errors()
        handle = self.lib.llama_model_load_from_file(path.encode(), params)
        if not handle:
            raise LlamaError(self.take_errors() or "llama_model_load_from_file failed")
        return Model(self, handle)


class Model:
    def __init__(self, library: Library, handle):
        self.library, self.lib, self.handle = library, library.lib, handle
        self.vocab = self.lib.llama_model_get_vocab(handle)
        self.n_vocab = self.lib.llama_vocab_n_tokens(self.vocab)
        self.n_ctx_train = self.lib.llama_model_n_ctx_train(handle)
        self.n_embd = self.lib.llama_model_n_embd(handle)
        self.has_encoder = self.lib.llama_model_has_encoder(handle)
        buf = ctypes.create_string_buffer(256)
        self.lib.llama_model_desc(handle, buf, 256)
        self.description = buf.value.decode("utf-8", "replace")

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        room = len(data) + 8
        while True:
            out = (llama_token * room)()
            n = self.lib.llama_tokenize(self.vocab, data, len(data), out, room, add_special, parse_special)
            if n >= 0:
                return list(out[:n])
            if n == -(2 ** 31):
                raise LlamaError("tokenization result does not fit in int32")
            room = -n

    def piece(self, token: int) -> bytes:
        """The bytes of one token as generated text (special tokens not rendered)."""
        buf = ctypes.create_string_buffer(64)
        n = self.lib.llama_token_to_piece(self.vocab, token, buf, 64, 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self.lib.llama_token_to_piece(self.vocab, token, buf, -n, 0, False)
        return buf.raw[:n]

    def detokenize(self, tokens) -> str:
        arr = (llama_token * max(len(tokens), 1))(*tokens)
        room = 16 * len(tokens) + 16
        while True:
            buf = ctypes.create_string_buffer(room)
            n = self.lib.llama_detokenize(self.vocab, arr, len(tokens), buf, room, False, False)
            if n >= 0:
                return buf.raw[:n].decode("utf-8", "replace")
            room = -n

    def is_eog(self, token: int) -> bool:
        return self.lib.llama_vocab_is_eog(self.vocab, token)

    @functools.cached_property
    def eog_tokens(self) -> tuple[int, ...]:
        """Every end-of-generation token of the vocabulary (EOS, EOT, EOM, ...: llama_vocab_is_eog),
        enumerated once per model, on the first request that ignores EOS."""
        return tuple(t for t in range(self.n_vocab) if self.lib.llama_vocab_is_eog(self.vocab, t))

    def context(self, *, n_ctx: int, n_batch: int, n_seq_max: int, threads: int, embeddings: bool = False,
                flash_attn: int = -1, type_k: int = 1, type_v: int = 1) -> "Context":
        """embeddings: a mean-pooled context, whose whole input must fit in one micro-batch."""
        p = self.lib.llama_context_default_params()
        p.n_ctx, p.n_batch, p.n_seq_max = n_ctx, n_batch, n_seq_max
        p.n_ubatch = n_batch if embeddings else min(n_batch, 512)
        p.n_threads = p.n_threads_batch = threads
        p.flash_attn_type, p.type_k, p.type_v = flash_attn, type_k, type_v
        p.embeddings = embeddings
        if embeddings:
            p.pooling_type = POOLING_MEAN
        p.kv_unified = False  # one KV stream per sequence: a request attends only to its own cells
        self.library.take_errors()
        handle = self.lib.llama_init_from_model(self.handle, p)
        if not handle:
            raise LlamaError(self.library.take_errors() or "llama_init_from_model failed")
        return Context(self, handle, n_batch, n_seq_max)

    def close(self) -> None:
        if self.handle:
            self.lib.llama_model_free(self.handle)
            self.handle = None


class Context:
    """A llama_context and one reusable batch of up to n_batch tokens, one sequence id each."""

    def __init__(self, model: Model, handle, n_batch: int, n_seq_max: int):
        self.model, self.lib, self.handle = model, model.lib, handle
        self.n_ctx = self.lib.llama_n_ctx(handle)
        self.n_ctx_seq = self.lib.llama_n_ctx_seq(handle)
        self.n_batch = n_batch
        self.n_seq_max = self.lib.llama_n_seq_max(handle)
        self.memory = self.lib.llama_get_memory(handle)
        self.batch = self.lib.llama_batch_init(n_batch, 0, 1)

    def decode(self, entries) -> None:
        """entries: [(token, pos, seq_id, wants_logits)] (at most n_batch), one llama_decode."""
        b = self.batch
        if len(entries) > self.n_batch:
            raise LlamaError(f"{len(entries)} tokens in one batch; n_batch is {self.n_batch}")
        for i, (token, pos, seq, logits) in enumerate(entries):
            b.token[i], b.pos[i], b.n_seq_id[i] = token, pos, 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if logits else 0
        b.n_tokens = len(entries)
        rc = self.lib.llama_decode(self.handle, b)
        if rc != 0:
            raise LlamaError(f"llama_decode returned {rc}: {self.model.library.take_errors() or 'no KV slot'}")

    def forget(self, seq: int, keep: int = 0) -> None:
        """Drops the KV cells of sequence `seq` from position `keep` on (0: every cell)."""
        self.lib.llama_memory_seq_rm(self.memory, seq, keep if keep > 0 else -1, -1)

    def sequence_embedding(self, seq: int, n: int) -> list[float]:
        ptr = self.lib.llama_get_embeddings_seq(self.handle, seq)
        if not ptr:
            raise LlamaError("no pooled embedding for the sequence (the context was made without embeddings)")
        return ptr[:n]

    def clear(self) -> None:
        self.lib.llama_memory_clear(self.memory, True)

    def close(self) -> None:
        if self.handle:
            self.lib.llama_batch_free(self.batch)
            self.lib.llama_free(self.handle)
            self.handle = None


def logit_bias_array(biases) -> ctypes.Array:
    """[(token, bias)] as the llama_logit_bias array llama_sampler_init_logit_bias reads."""
    biases = list(biases)
    return (LogitBias * len(biases))(*(LogitBias(token, bias) for token, bias in biases))


class Sampler:
    """A sampler chain in llama.cpp's common order: the EOG mask of ignore_eos (EOG_BIAS), grammar,
    penalties, top-k, typical, top-p, min-p, temperature, then a seeded draw (or greedy at
    temperature 0)."""

    def __init__(self, model: Model, *, temperature: float, top_k: int, top_p: float, min_p: float,
                 typical_p: float, repeat_last_n: int, repeat_penalty: float, frequency_penalty: float,
                 presence_penalty: float, seed: int, grammar: str = "", ignore_eos: bool = False):
        lib = self.lib = model.lib
        self.handle = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        try:
            eog = model.eog_tokens if ignore_eos else ()
            if eog:  # first, so that no later sampler (top-k, a draw) ever sees an EOG token's own logit
                bias = lib.llama_sampler_init_logit_bias(model.n_vocab, len(eog),
                                                         logit_bias_array((t, EOG_BIAS) for t in eog))
                if not bias:
                    raise LlamaError(f"llama_sampler_init_logit_bias failed for the {len(eog)} end-of-generation "
                                     "tokens (IgnoreEOS)")
                lib.llama_sampler_chain_add(self.handle, bias)
            if grammar:
                model.library.take_errors()
                g = lib.llama_sampler_init_grammar(model.vocab, grammar.encode("utf-8"), b"root")
                if not g:
                    raise GrammarError(model.library.take_errors() or "the grammar does not parse")
                lib.llama_sampler_chain_add(self.handle, g)
            if repeat_penalty != 1.0 or frequency_penalty or presence_penalty:
                lib.llama_sampler_chain_add(self.handle, lib.llama_sampler_init_penalties(
                    model.n_vocab, repeat_last_n, repeat_penalty, frequency_penalty, presence_penalty))
            if temperature <= 0:
                lib.llama_sampler_chain_add(self.handle, lib.llama_sampler_init_greedy())
                return
            if top_k > 0:
                lib.llama_sampler_chain_add(self.handle, lib.llama_sampler_init_top_k(top_k))
            if 0 < typical_p < 1:
                lib.llama_sampler_chain_add(self.handle, lib.llama_sampler_init_typical(typical_p, 1))
            if 0 < top_p < 1:
                lib.llama_sampler_chain_add(self.handle, lib.llama_sampler_init_top_p(top_p, 1))
            if min_p > 0:
                lib.llama_sampler_chain_add(self.handle, lib.llama_sampler_init_min_p(min_p, 1))
            lib.llama_sampler_chain_add(self.handle, lib.llama_sampler_init_temp(temperature))
            lib.llama_sampler_chain_add(self.handle, lib.llama_sampler_init_dist(seed & 0xFFFFFFFF))
        except BaseException:
            self.close()
            raise

    def sample(self, context: Context, index: int) -> int:
        """Samples (and accepts) a token from output `index` of the last decode."""
        return self.lib.llama_sampler_sample(self.handle, context.handle, index)

    def close(self) -> None:
        if self.handle:
            self.lib.llama_sampler_free(self.handle)
            self.handle = None
