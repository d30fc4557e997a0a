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


CONTEXT_ATTRIBUTES = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "n_ctx")


def context_length(config):
    """The model's context in tokens, from a Hugging Face config; None when it does not say."""
    for name in CONTEXT_ATTRIBUTES:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def max_new_tokens(prompt_tokens: int, requested: int, context) -> int:
    """Tokens to generate: ``requested`` (0: the default, shortened to fit the context).

    A prompt that fills the context, or an explicit ``Tokens`` that runs past it, is
    INVALID_ARGUMENT naming the limit, not an IndexError deep inside the model.
    """
    if context is None:
        return requested or DEFAULT_MAX_TOKENS
    require(
        prompt_tokens < context,
        f"prompt is {prompt_tokens} tokens; the model's context is {context} tokens: shorten the prompt",
    )
    room = context - prompt_tokens
    if not requested:
        return min(DEFAULT_MAX_TOKENS, room)
    require(
        requested <= room,
        f"Tokens={requested} with a {prompt_tokens}-token prompt exceeds the model's context of {context} tokens "
        f"(at most {room})",
    )
    return requested


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
