"""LocalAI transformers backend: causal LM text generation, embeddings, tokenization."""

import os
import threading
import time

from backends.common.device import select_device_and_dtype
from backends.common.errors import InvalidArgument, require
from backends.common.llm import context_length, max_new_tokens
from backends.common.llm import prompt_text as build_prompt
from backends.common.llm import truncate_at_stop, validate_predict
from backends.common.server import BaseServicer, run
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
    return kwargs


class TransformersServicer(BaseServicer):
    def load(self, request, path):
        import torch  # noqa: PLC0415
        from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

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
        from transformers import TextIteratorStreamer  # noqa: PLC0415

        inputs = self._inputs(request)
        limits = self._generation_kwargs(request, model, inputs)
        if request.Seed:
            self.torch.manual_seed(request.Seed)
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True, timeout=600)
        kwargs = dict(**inputs, **limits, streamer=streamer, pad_token_id=self.tokenizer.pad_token_id)
        errors = []

        def _generate():
            try:
                with self.torch.no_grad():
                    model.generate(**kwargs)
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
                streamer.end()

        thread = threading.Thread(target=_generate, daemon=True)
        thread.start()
        emitted = ""
        stops = [s for s in request.StopPrompts if s]
        for piece in streamer:
            if not piece:
                continue
            if stops:
                candidate = truncate_at_stop(emitted + piece, stops)
                if len(candidate) < len(emitted + piece):
                    tail = candidate[len(emitted):]
                    if tail:
                        yield backend_pb2.Reply(message=tail.encode("utf-8"))
                    break
            emitted += piece
            yield backend_pb2.Reply(message=piece.encode("utf-8"))
            if not context.is_active():
                break
        thread.join(timeout=1)
        if errors:
            raise errors[0]

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
