"""LocalAI llama-cpp backend on llama.cpp (engines/llama-cpp): GGUF text generation with continuous
batching, embeddings and tokenization from a PEX with no torch or numpy.

The PEX carries one libllama.so per CPU level (fallback, avx2, avx512); the best one this CPU
supports is loaded with ctypes (binding.py). Concurrent Predict/PredictStream calls share one
llama_decode per step (batching.py): up to `parallel` sequences at once, the rest wait their turn.

LoadModel: `Model` is a GGUF file (or a directory holding exactly one). ContextSize is each
request's context in tokens (prompt + generated; 0: the model's training context, at most
DEFAULT_CONTEXT); Threads (0: every core); NBatch the tokens one llama_decode takes (0: 512);
Seed the default sampling seed; MMap / MLock; Embeddings enables Embedding (a second, pooled
context); FlashAttention "auto|on|off"; CacheTypeKey / CacheTypeValue (f16 default, f32, q8_0, ...).
PredictOptions.PromptCacheAll (LocalAI's llama-cpp backend passes it as llama-server's
cache_prompt) reuses the KV cells of an earlier request's prompt prefix (batching.py).
`Options` as LocalAI's llama-cpp backend reads them: `parallel:N` (alias `n_parallel:N`; else
$LLAMACPP_PARALLEL, else 1) bounds the sequences decoded together. The gRPC server admits at
most --workers / $PYTHON_GRPC_MAX_WORKERS calls at once: set it to at least `parallel`.
"""
from __future__ import annotations

import contextlib
import os
import threading

from backends.common.cpu_levels import packaged_library
from backends.common.errors import InvalidArgument, require
from backends.common.llm import prompt_text
from backends.common.paths import model_file
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

from .batching import Generation, Scheduler
from .binding import FLASH_ATTN, KV_TYPES, LLAMA_DEFAULT_SEED, GrammarError, Library, LlamaError, Sampler

ENGINE_DIR = "engines/llama-cpp"
LIBRARY = "libllama.so"
DEFAULT_CONTEXT = 4096
DEFAULT_BATCH = 512
DEFAULT_MAX_TOKENS = 512
MAX_PARALLEL = 64
GGUF_MAGIC = b"GGUF"


class Engine(Library):
    """The best libllama.so of this PEX for this CPU, extracted to a real file for ctypes."""

    def __init__(self):
        self._files = contextlib.ExitStack()
        self.level, lib = packaged_library(__package__, ENGINE_DIR, LIBRARY, "LOCALAI_LLAMA_CPU", self._files)
        super().__init__(lib, verbose=bool(os.environ.get("LOCALAI_LLAMA_VERBOSE")))


def gguf_file(path: str) -> str:
    """The GGUF to load: `path`, or the one .gguf in directory `path`; refuses a non-GGUF file."""
    path = model_file(path, (".gguf",), "GGUF model")
    with open(path, "rb") as f:
        head = f.read(8)
    require(head[:4] == GGUF_MAGIC,
            f"{path}: not a GGUF file (starts with {head[:4]!r}, expected {GGUF_MAGIC!r}): convert the model with "
            "llama.cpp's convert_hf_to_gguf.py")
    return path


def parallel_option(options, environ=None) -> int:
    environ = os.environ if environ is None else environ
    value, origin = None, ""
    for op in options:
        name, _, v = op.partition(":")
        if name in ("parallel", "n_parallel"):
            value, origin = v, f"option {op}"
    if value is None and environ.get("LLAMACPP_PARALLEL", "").strip():
        value, origin = environ["LLAMACPP_PARALLEL"].strip(), f"LLAMACPP_PARALLEL={environ['LLAMACPP_PARALLEL']}"
    if value is None:
        return 1
    require(value.isdigit() and 1 <= int(value) <= MAX_PARALLEL,
            f"{origin}: parallel sequences must be an integer in 1..{MAX_PARALLEL}")
    return int(value)


def kv_type(name: str, field: str) -> int:
    if not name:
        return KV_TYPES["f16"]
    require(name.lower() in KV_TYPES, f"{field}={name!r}: not a KV cache type ({', '.join(KV_TYPES)})")
    return KV_TYPES[name.lower()]


class Loaded:
    def __init__(self, model, context, scheduler, n_ctx: int, parallel: int, seed: int, embed_context=None):
        self.model, self.context, self.scheduler = model, context, scheduler
        self.n_ctx, self.parallel, self.seed = n_ctx, parallel, seed
        self.embed_context = embed_context
        self.embed_lock = threading.Lock()
        self.model_bytes = int(model.lib.llama_model_size(model.handle))

    def close(self) -> None:
        self.scheduler.close()
        if self.embed_context is not None:
            self.embed_context.close()
        self.context.close()
        self.model.close()


def sampling_seed(request_seed: int, model_seed: int) -> int:
    """PredictOptions.Seed, else ModelOptions.Seed; 0 and -1 mean unset (then a random seed)."""
    for s in (request_seed, model_seed):
        if s not in (0, -1):
            return s & 0xFFFFFFFF
    return LLAMA_DEFAULT_SEED


def validate_sampling(request) -> None:
    require(request.Tokens >= 0, f"Tokens must be >= 0, got {request.Tokens}")
    require(request.Temperature >= 0, f"Temperature must be >= 0, got {request.Temperature}")
    require(0 <= request.TopP <= 1, f"TopP must be in [0, 1], got {request.TopP}")
    require(0 <= request.MinP <= 1, f"MinP must be in [0, 1], got {request.MinP}")
    require(0 <= request.TypicalP <= 1, f"TypicalP must be in [0, 1], got {request.TypicalP}")
    require(request.TopK >= 0, f"TopK must be >= 0, got {request.TopK}")
    require(request.Penalty >= 0, f"Penalty (repeat penalty) must be >= 0, got {request.Penalty}")
    require(request.Repeat >= -1, f"Repeat (penalty window) must be >= -1, got {request.Repeat}")
    require(request.Mirostat == 0, f"Mirostat={request.Mirostat}: mirostat sampling is not served by this backend")


class LlamaCppServicer(BaseServicer):
    def load(self, request, path):
        if not hasattr(self, "engine"):
            self.engine = Engine()
        path = gguf_file(path)
        parallel = parallel_option(request.Options)
        require(request.ContextSize >= 0, f"ContextSize must be >= 0, got {request.ContextSize}")
        require(request.NBatch >= 0, f"NBatch must be >= 0, got {request.NBatch}")
        require(request.Threads >= 0, f"Threads must be >= 0, got {request.Threads}")
        flash = (request.FlashAttention or "auto").lower()
        require(flash in FLASH_ATTN, f"FlashAttention={request.FlashAttention!r}: expected auto, on or off")
        type_k = kv_type(request.CacheTypeKey, "CacheTypeKey")
        type_v = kv_type(request.CacheTypeValue, "CacheTypeValue")
        try:
            model = self.engine.load_model(path, mmap=request.MMap or not request.MLock, mlock=request.MLock)
        except LlamaError as e:
            raise InvalidArgument(f"{path}: llama.cpp cannot load it: {e}; expected a complete GGUF model "
                                  "(llama.cpp's convert_hf_to_gguf.py)") from None
        try:
            require(not model.has_encoder, f"{path}: encoder-decoder models are not served by this backend")
            n_ctx = request.ContextSize or min(model.n_ctx_train or DEFAULT_CONTEXT, DEFAULT_CONTEXT)
            n_batch = request.NBatch or DEFAULT_BATCH
            threads = request.Threads or os.cpu_count() or 1
            try:
                context = model.context(n_ctx=n_ctx * parallel, n_batch=n_batch, n_seq_max=parallel, threads=threads,
                                        flash_attn=FLASH_ATTN[flash], type_k=type_k, type_v=type_v)
            except LlamaError as e:
                raise InvalidArgument(f"cannot make a context of {n_ctx} tokens x {parallel} sequences: {e}") from None
            embed = None
            if request.Embeddings:
                try:
                    embed = model.context(n_ctx=n_ctx, n_batch=n_ctx, n_seq_max=1, threads=threads, embeddings=True,
                                          flash_attn=FLASH_ATTN[flash], type_k=type_k, type_v=type_v)
                except BaseException:
                    context.close()
                    raise
        except LlamaError as e:
            model.close()
            raise InvalidArgument(f"cannot make the embedding context of {n_ctx} tokens: {e}") from None
        except BaseException:
            model.close()
            raise
        scheduler = Scheduler(model, context, n_ctx)
        return Loaded(model, context, scheduler, n_ctx, parallel, request.Seed, embed)

    def unload(self) -> None:
        loaded = getattr(self, "model", None)
        if loaded is not None:
            loaded.close()
        super().unload()

    # ---- generation ------------------------------------------------------------------------
    def _generation(self, request) -> tuple[Loaded, Generation]:
        loaded: Loaded = self.require_model()
        validate_sampling(request)
        has_messages = request.UseTokenizerTemplate and len(request.Messages) > 0
        require(has_messages or bool(request.Prompt), "Prompt is empty (and no Messages with UseTokenizerTemplate)")
        tokens = loaded.model.tokenize(prompt_text(request))
        n, limit = len(tokens), loaded.n_ctx
        require(n < limit, f"prompt is {n} tokens; the context (ContextSize) is {limit} tokens: shorten the prompt")
        room = limit - n
        if request.Tokens:
            require(request.Tokens <= room, f"Tokens={request.Tokens} with a {n}-token prompt exceeds the context "
                                            f"(ContextSize) of {limit} tokens (at most {room})")
        max_tokens = request.Tokens or min(DEFAULT_MAX_TOKENS, room)
        sampler_args = dict(
            temperature=request.Temperature, top_k=request.TopK, top_p=request.TopP, min_p=request.MinP,
            typical_p=request.TypicalP, repeat_last_n=request.Repeat if request.Repeat else 64,
            repeat_penalty=request.Penalty or 1.0, frequency_penalty=request.FrequencyPenalty,
            presence_penalty=request.PresencePenalty, seed=sampling_seed(request.Seed, loaded.seed),
            grammar=request.Grammar, ignore_eos=request.IgnoreEOS,
        )
        try:
            sampler = Sampler(loaded.model, **sampler_args)
        except GrammarError as e:
            raise InvalidArgument(f"Grammar: llama.cpp cannot parse it as GBNF (the start rule is `root`): {e}") from None
        except LlamaError as e:
            raise RuntimeError(f"llama.cpp: {e}") from None
        gen = Generation(prompt=tokens, max_tokens=max_tokens, sampler=sampler,
                         stops=tuple(s for s in request.StopPrompts if s), cache_prompt=request.PromptCacheAll)
        return loaded, gen

    @staticmethod
    def _chunks(loaded: Loaded, gen: Generation):
        try:
            yield from gen.chunks()
        except LlamaError as e:
            raise RuntimeError(f"llama.cpp: {e}") from None
        finally:
            loaded.scheduler.cancel(gen)  # no-op when finished; frees the sequence when the caller left

    def _reply(self, gen: Generation, text: str) -> backend_pb2.Reply:
        return backend_pb2.Reply(message=text.encode("utf-8"), tokens=gen.generated, prompt_tokens=len(gen.prompt),
                                 timing_prompt_processing=gen.prompt_seconds * 1000,
                                 timing_token_generation=gen.generation_seconds * 1000)

    def Predict(self, request, context):
        loaded, gen = self._generation(request)
        loaded.scheduler.submit(gen)
        text = "".join(self._chunks(loaded, gen))
        return self._reply(gen, text)

    def PredictStream(self, request, context):
        loaded, gen = self._generation(request)
        loaded.scheduler.submit(gen)
        for chunk in self._chunks(loaded, gen):
            yield backend_pb2.Reply(message=chunk.encode("utf-8"), tokens=gen.generated, prompt_tokens=len(gen.prompt))
        yield self._reply(gen, "")  # the counts and timings, with no text

    # ---- tokens and embeddings ---------------------------------------------------------------
    def TokenizeString(self, request, context):
        require(bool(request.Prompt), "Prompt is empty")
        loaded: Loaded = self.require_model()
        ids = loaded.model.tokenize(request.Prompt, add_special=False)
        return backend_pb2.TokenizationResponse(length=len(ids), tokens=ids)

    def Detokenize(self, request, context):
        loaded: Loaded = self.require_model()
        n_vocab = loaded.model.n_vocab
        bad = [t for t in request.tokens if not 0 <= t < n_vocab]
        require(not bad, f"tokens {bad[:5]} are outside the vocabulary (0..{n_vocab - 1})")
        return backend_pb2.DetokenizeResponse(content=loaded.model.detokenize(list(request.tokens)))

    def Embedding(self, request, context):
        loaded: Loaded = self.require_model()
        require(loaded.embed_context is not None, "the model was loaded without Embeddings=true: LoadModel with "
                                                  "Embeddings to serve Embedding")
        text = request.Embeddings or request.Prompt
        require(bool(text), "Embeddings/Prompt text is empty")
        tokens = loaded.model.tokenize(text)
        n, limit = len(tokens), loaded.n_ctx
        require(n <= limit, f"text is {n} tokens; the context (ContextSize) is {limit} tokens: shorten the text")
        ctx = loaded.embed_context
        with loaded.embed_lock:
            ctx.clear()
            try:
                ctx.decode([(t, i, 0, True) for i, t in enumerate(tokens)])
                vec = ctx.sequence_embedding(0, loaded.model.n_embd)
            except LlamaError as e:
                raise RuntimeError(f"llama.cpp: {e}") from None
        return backend_pb2.EmbeddingResult(embeddings=vec, dim=len(vec), tokens=n, prompt_tokens=n,
                                           layout=backend_pb2.EMBEDDING_LAYOUT_FINAL)

    def Status(self, request, context):
        reply = super().Status(request, context)
        # Status holds no lease (it answers during a load or a Free): what the slot holds now.
        slot = self._slot.loaded
        loaded: Loaded | None = slot.model if slot is not None else None
        if loaded is not None:
            reply.memory.breakdown["model_bytes"] = loaded.model_bytes
            reply.memory.breakdown["running_sequences"] = len(loaded.scheduler.running)
            # The most requests one llama_decode has carried since LoadModel (continuous batching).
            reply.memory.breakdown["max_batch_sequences"] = loaded.scheduler.max_batch_sequences
            reply.memory.breakdown["parallel"] = loaded.parallel
            # Prompt tokens decoded, and taken from kept KV cells instead (PromptCacheAll), since LoadModel.
            reply.memory.breakdown["prompt_tokens_evaluated"] = loaded.scheduler.prompt_tokens_evaluated
            reply.memory.breakdown["prompt_tokens_reused"] = loaded.scheduler.prompt_tokens_reused
        return reply


def main(argv=None):
    run(LlamaCppServicer, argv)


if __name__ == "__main__":
    main()
