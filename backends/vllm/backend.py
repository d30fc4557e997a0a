"""LocalAI vllm backend: Predict and PredictStream through vLLM's offline ``LLM`` API.

vLLM's ``LLM.generate`` is not incremental, so PredictStream sends the completion as one
Reply (then ends): clients that stream still get the full answer.
"""

import json
import time

from backends.common.errors import InvalidArgument
from backends.common.llm import DEFAULT_MAX_TOKENS, prompt_text, truncate_at_stop, validate_predict
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2


def engine_kwargs(request) -> dict:
    kwargs = {"model": None, "trust_remote_code": bool(request.TrustRemoteCode), "enforce_eager": bool(request.EnforceEager)}
    if request.Quantization:
        kwargs["quantization"] = request.Quantization
    if request.GPUMemoryUtilization:
        kwargs["gpu_memory_utilization"] = request.GPUMemoryUtilization
    if request.SwapSpace:
        kwargs["swap_space"] = request.SwapSpace
    if request.MaxModelLen:
        kwargs["max_model_len"] = request.MaxModelLen
    if request.TensorParallelSize:
        kwargs["tensor_parallel_size"] = request.TensorParallelSize
    if request.DType:
        kwargs["dtype"] = request.DType
    if request.LoadFormat:
        kwargs["load_format"] = request.LoadFormat
    if request.Seed:
        kwargs["seed"] = request.Seed
    if request.EngineArgs:
        try:
            extra = json.loads(request.EngineArgs)
        except ValueError as exc:
            raise InvalidArgument(f"EngineArgs is not valid JSON: {exc}") from None
        if not isinstance(extra, dict):
            raise InvalidArgument("EngineArgs must be a JSON object")
        kwargs.update(extra)
    return kwargs


def sampling_kwargs(request) -> dict:
    kw = {"max_tokens": request.Tokens or DEFAULT_MAX_TOKENS, "temperature": request.Temperature}
    if request.TopP:
        kw["top_p"] = request.TopP
    if request.TopK:
        kw["top_k"] = request.TopK
    if request.MinP:
        kw["min_p"] = request.MinP
    if request.Penalty:
        kw["repetition_penalty"] = request.Penalty
    if request.PresencePenalty:
        kw["presence_penalty"] = request.PresencePenalty
    if request.FrequencyPenalty:
        kw["frequency_penalty"] = request.FrequencyPenalty
    if request.Seed:
        kw["seed"] = request.Seed
    stops = [s for s in request.StopPrompts if s]
    if stops:
        kw["stop"] = stops
    return kw


class VLLMServicer(BaseServicer):
    def load(self, request, path):
        from vllm import LLM

        kwargs = engine_kwargs(request)
        kwargs["model"] = path
        llm = LLM(**kwargs)
        self.tokenizer = llm.get_tokenizer()
        return llm

    def _generate(self, request):
        validate_predict(request)
        llm = self.require_model()
        from vllm import SamplingParams

        prompt = prompt_text(request, self.tokenizer)
        start = time.time()
        out = llm.generate([prompt], SamplingParams(**sampling_kwargs(request)), use_tqdm=False)[0]
        completion = out.outputs[0]
        text = truncate_at_stop(completion.text, request.StopPrompts)
        return backend_pb2.Reply(
            message=text.encode("utf-8"), tokens=len(completion.token_ids),
            prompt_tokens=len(out.prompt_token_ids or []), timing_token_generation=time.time() - start,
        )

    def Predict(self, request, context):
        return self._generate(request)

    def PredictStream(self, request, context):
        yield self._generate(request)


def main(argv=None):
    run(VLLMServicer, argv)


if __name__ == "__main__":
    main()
