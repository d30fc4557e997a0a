"""Helpers shared by text-generation backends (vllm, exllama2)."""

from .errors import require

DEFAULT_MAX_TOKENS = 512


def validate_predict(request) -> None:
    has_messages = request.UseTokenizerTemplate and len(request.Messages) > 0
    require(has_messages or bool(request.Prompt), "Prompt is empty (and no Messages with UseTokenizerTemplate)")
    require(request.Tokens >= 0, f"Tokens must be >= 0, got {request.Tokens}")
    require(request.Temperature >= 0, f"Temperature must be >= 0, got {request.Temperature}")
    require(0 <= request.TopP <= 1, f"TopP must be in [0, 1], got {request.TopP}")
    require(request.TopK >= 0, f"TopK must be >= 0, got {request.TopK}")


def messages_as_dicts(request):
    return [{"role": m.role, "content": m.content} for m in request.Messages]


def prompt_text(request, tokenizer=None) -> str:
    if request.UseTokenizerTemplate and len(request.Messages) > 0:
        if tokenizer is not None and getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(messages_as_dicts(request), tokenize=False, add_generation_prompt=True)
        return "\n".join(f"{m.role}: {m.content}" for m in request.Messages) + "\nassistant:"
    return request.Prompt


def truncate_at_stop(text: str, stops) -> str:
    cut = len(text)
    for stop in stops:
        if stop:
            idx = text.find(stop)
            if idx != -1:
                cut = min(cut, idx)
    return text[:cut]
