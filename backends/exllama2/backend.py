"""LocalAI exllama2 backend: Predict/PredictStream with ExLlamaV2's dynamic generator (CUDA)."""

import time

from backends.common.llm import DEFAULT_MAX_TOKENS, prompt_text, truncate_at_stop, validate_predict
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2


class ExLlamaV2Servicer(BaseServicer):
    def load(self, request, path):
        from exllamav2 import ExLlamaV2, ExLlamaV2Cache, ExLlamaV2Config, ExLlamaV2Tokenizer
        from exllamav2.generator import ExLlamaV2DynamicGenerator

        config = ExLlamaV2Config(path)
        if request.ContextSize:
            config.max_seq_len = request.ContextSize
        model = ExLlamaV2(config)
        cache = ExLlamaV2Cache(model, lazy=True, max_seq_len=config.max_seq_len)
        model.load_autosplit(cache)
        self.tokenizer = ExLlamaV2Tokenizer(config)
        self.generator = ExLlamaV2DynamicGenerator(model=model, cache=cache, tokenizer=self.tokenizer)
        return model

    def _settings(self, request):
        from exllamav2.generator import ExLlamaV2Sampler

        s = ExLlamaV2Sampler.Settings()
        s.temperature = request.Temperature
        if request.TopP:
            s.top_p = request.TopP
        if request.TopK:
            s.top_k = request.TopK
        if request.MinP:
            s.min_p = request.MinP
        if request.Penalty:
            s.token_repetition_penalty = request.Penalty
        return s

    def Predict(self, request, context):
        validate_predict(request)
        self.require_model()
        prompt = prompt_text(request)
        start = time.time()
        text = self.generator.generate(
            prompt=prompt, max_new_tokens=request.Tokens or DEFAULT_MAX_TOKENS, gen_settings=self._settings(request),
            stop_conditions=[s for s in request.StopPrompts if s] + [self.tokenizer.eos_token_id],
            add_bos=True, completion_only=True, seed=request.Seed or None,
        )
        return backend_pb2.Reply(message=truncate_at_stop(text, request.StopPrompts).encode("utf-8"),
                                 timing_token_generation=time.time() - start)

    def PredictStream(self, request, context):
        validate_predict(request)
        self.require_model()
        from exllamav2.generator import ExLlamaV2DynamicJob

        ids = self.tokenizer.encode(prompt_text(request), add_bos=True)
        job = ExLlamaV2DynamicJob(
            input_ids=ids, max_new_tokens=request.Tokens or DEFAULT_MAX_TOKENS, gen_settings=self._settings(request),
            stop_conditions=[s for s in request.StopPrompts if s] + [self.tokenizer.eos_token_id],
            seed=request.Seed or None,
        )
        self.generator.enqueue(job)
        try:
            while self.generator.num_remaining_jobs():
                for result in self.generator.iterate():
                    chunk = result.get("text", "")
                    if chunk:
                        yield backend_pb2.Reply(message=chunk.encode("utf-8"))
                if not context.is_active():
                    break
        finally:
            self.generator.clear_queue()


def main(argv=None):
    run(ExLlamaV2Servicer, argv)


if __name__ == "__main__":
    main()
