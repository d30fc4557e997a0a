"""LocalAI transformers backend: causal LM text generation, embeddings, tokenization."""

import contextlib
import os
import time

from backends.common.device import select_device_and_dtype
from backends.common.errors import InvalidArgument, require
from backends.common.llm import context_length, max_new_tokens, truncate_at_stop, validate_predict
from backends.common.llm import prompt_text as build_prompt
from backends.common.model_files import check_model
from backends.common.server import BaseServicer, run
from backends.common.streaming import stream_from_thread
from backends.proto import backend_pb2


def generation_kwargs(request, prompt_tokens: int = 0, context=None) -> dict:
    """Keyword arguments for ``model.generate`` from PredictOptions (after validation)."""
    kwargs = {"max_new_tokens": max_new_tokens(prompt_tokens, request.Tokens, context)}
    if request.Temperature > 0:
        kwargs["do_sample"] = True
        kwargs["temperature"] = request.Temperature
        if request.TopP > 0:
            kwargs["top_p"] = request.TopP
        if request.TopK > 0:
            kwargs["top_k"] = request.TopK
    else:
        kwargs["do_sample"] = False
    if request.Penalty > 0:
        kwargs["repetition_penalty"] = request.Penalty
    if request.IgnoreEOS:
        # generate()'s MinNewTokens processor masks EOS until max_new_tokens, as llama.cpp's
        # ignore_eos masks end-of-generation tokens.
        kwargs["min_new_tokens"] = kwargs["max_new_tokens"]
    return kwargs


EXPECTS = "a transformers model folder (save_pretrained: config.json, model.safetensors or pytorch_model.bin, tokenizer files)"


class TransformersServicer(BaseServicer):
    model_expects = EXPECTS

    def load(self, request, path):
        if os.path.exists(path):  # else a hub id (online only: resolve_model_path)
            check_model(path, EXPECTS, directory=True, required=["config.json"])
        import torch

        from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

        device, dtype = select_device_and_dtype(torch, request.DType or None)
        trust = bool(request.TrustRemoteCode)
        tokenizer = AutoTokenizer.from_pretrained(request.Tokenizer or path, trust_remote_code=trust)
        if request.Embeddings or request.Type in ("AutoModel", "Embeddings"):
            model = AutoModel.from_pretrained(path, dtype=dtype, trust_remote_code=trust)
            kind = "embedding"
        else:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, trust_remote_code=trust)
            kind = "causal"
        model.to(device)
        model.eval()
        if tokenizer.pad_token is None and tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        if request.Seed:
            torch.manual_seed(request.Seed)
        self.torch = torch
        self.device = device
        self.tokenizer = tokenizer
        self.kind = kind
        return model

    def _require_causal(self):
        model = self.require_model()
        if self.kind != "causal":
            raise InvalidArgument("model was loaded for embeddings (Embeddings=true); Predict needs a causal LM")
        return model

    def _inputs(self, request):
        prompt = build_prompt(request, self.tokenizer)
        return self.tokenizer(prompt, return_tensors="pt").to(self.device)

    def _generation_kwargs(self, request, model, inputs) -> dict:
        n_prompt = int(inputs["input_ids"].shape[-1])
        return generation_kwargs(request, n_prompt, context_length(model.config))

    def Predict(self, request, context):
        validate_predict(request)
        model = self._require_causal()
        inputs = self._inputs(request)
        kwargs = self._generation_kwargs(request, model, inputs)
        if request.Seed:
            self.torch.manual_seed(request.Seed)
        start = time.time()
        with self.torch.no_grad():
            out = model.generate(**inputs, **kwargs, pad_token_id=self.tokenizer.pad_token_id)
        n_prompt = int(inputs["input_ids"].shape[-1])
        new_tokens = out[0][n_prompt:]
        text = truncate_at_stop(self.tokenizer.decode(new_tokens, skip_special_tokens=True), request.StopPrompts)
        return backend_pb2.Reply(
            message=text.encode("utf-8"),
            tokens=int(new_tokens.shape[-1]),
            prompt_tokens=n_prompt,
            timing_token_generation=time.time() - start,
        )

    def PredictStream(self, request, context):
        validate_predict(request)
        model = self._require_causal()
        from transformers import TextStreamer

        inputs = self._inputs(request)
        limits = self._generation_kwargs(request, model, inputs)
        if request.Seed:
            self.torch.manual_seed(request.Seed)
        tokenizer, torch = self.tokenizer, self.torch

        class Emitter(TextStreamer):
            """Hands each piece of decoded text to the stream as generate() finalizes it, with the
            number of tokens generated so far (LocalAI reads a stream's usage from every reply's
            tokens/prompt_tokens, core/backend/llm.go)."""

            def __init__(self, emit):
                super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=True)
                self.emit = emit
                self.generated = 0

            def put(self, value):
                if not self.next_tokens_are_prompt:  # the first put() is the prompt
                    self.generated += int(value.numel())
                super().put(value)

            def on_finalized_text(self, text, stream_end=False):
                if text:
                    self.emit((text, self.generated))  # raises StreamStopped once stopped: ends generate()

        def generate(emit, _stop):
            with torch.no_grad():
                model.generate(**inputs, **limits, streamer=Emitter(emit), pad_token_id=tokenizer.pad_token_id)

        n_prompt = int(inputs["input_ids"].shape[-1])

        def reply(text: str, generated: int):
            return backend_pb2.Reply(message=text.encode("utf-8"), tokens=generated, prompt_tokens=n_prompt)

        stops = [s for s in request.StopPrompts if s]
        emitted = ""
        with contextlib.closing(stream_from_thread(generate, context, name="generate")) as pieces:
            for piece, generated in pieces:
                if stops:
                    candidate = truncate_at_stop(emitted + piece, stops)
                    if len(candidate) < len(emitted + piece):
                        tail = candidate[len(emitted):]
                        if tail:
                            yield reply(tail, generated)
                        return  # closing the stream stops generate() at its next piece
                emitted += piece
                yield reply(piece, generated)

    def Embedding(self, request, context):
        require(bool(request.Embeddings or request.Prompt), "Embeddings/Prompt text is empty")
        model = self.require_model()
        text = request.Embeddings or request.Prompt
        inputs = self.tokenizer(text, return_tensors="pt").to(self.device)
        n_tokens, context = int(inputs["input_ids"].shape[-1]), context_length(model.config)
        require(
            context is None or n_tokens <= context,
            f"text is {n_tokens} tokens; the model's context is {context} tokens: shorten the text",
        )
        with self.torch.no_grad():
            if self.kind == "causal":
                out = model(**inputs, output_hidden_states=True)
                hidden = out.hidden_states[-1]
            else:
                hidden = model(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        vec = pooled[0].float().cpu().tolist()
        n = int(inputs["input_ids"].shape[-1])
        return backend_pb2.EmbeddingResult(
            embeddings=vec, dim=len(vec), tokens=n, prompt_tokens=n,
            layout=backend_pb2.EMBEDDING_LAYOUT_FINAL,
        )

    def TokenizeString(self, request, context):
        require(bool(request.Prompt), "Prompt is empty")
        self.require_model()
        ids = self.tokenizer(request.Prompt, add_special_tokens=False)["input_ids"]
        return backend_pb2.TokenizationResponse(length=len(ids), tokens=ids)


def main(argv=None):
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run(TransformersServicer, argv)


if __name__ == "__main__":
    main()
