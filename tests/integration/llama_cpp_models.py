"""A tiny random Llama (transformers' own LlamaConfig) with a Llama-style tokenizer, and its GGUF
made by llama.cpp's convert_hf_to_gguf.py from the pinned llama_cpp_python sdist.

The tokenizer is a byte-fallback BPE trained here with `tokenizers` on a small corpus and wrapped
as transformers' LlamaTokenizerFast layout (Metaspace-style normalizer and decoder), which is what
the converter's LlamaHfVocab path reads (the SentencePiece path needs tokenizer.model and the
sentencepiece package; the GPT-2 path needs a pre-tokenizer whose hash the converter knows).

Why the conversion runs in the test and not as a `converted_model` target: the HF checkpoint is
made by the test (no model exists at build time), and converted_model extracts one script from the
archive while convert_hf_to_gguf.py imports its sibling packages conversion/ and gguf-py/.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

SDIST = Path("3rdparty/native/llama_cpp_python-0.3.36.tar.gz")
LLAMA_DIR = "vendor/llama.cpp/"
CONVERTER_PARTS = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a small model speaks in short words and long silences",
    "llama cpp decodes every sequence in one batch",
    "héllo wörld, ünïcode bytes: 日本語 and emoji 🙂 must round trip",
    "numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000",
    "once upon a time there was a tiny random network",
] * 20


def make_tokenizer(out: Path, vocab_size: int = 320):
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers
    from transformers import LlamaTokenizerFast

    specials = ["<unk>", "<s>", "</s>"]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=1, right=0)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size + len(byte_tokens), special_tokens=specials + byte_tokens,
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    fast = LlamaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                              add_bos_token=True, add_eos_token=False, legacy=False)
    fast.save_pretrained(out)
    return fast


def make_model(out: Path, seed: int = 0, hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2,
               context: int = 512):
    """Saves a random LlamaForCausalLM (f32 safetensors) and its tokenizer to `out`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = make_tokenizer(out)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 3, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=context,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, initializer_range=0.5,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(out)
    return model, tokenizer


def extract_converter(sdist: Path, dest: Path) -> Path:
    with tarfile.open(sdist) as tf:
        members = []
        for m in tf.getmembers():
            rel = m.name.partition("/")[2]
            if rel.startswith(LLAMA_DIR) and rel[len(LLAMA_DIR):].startswith(CONVERTER_PARTS) and m.isfile():
                m.name = rel[len(LLAMA_DIR):]
                members.append(m)
        tf.extractall(dest, members=members)
    return dest / "convert_hf_to_gguf.py"


def convert(model_dir: Path, outfile: Path, sdist: Path = SDIST, outtype: str = "f32") -> Path:
    """Runs the archive's converter (its own gguf-py, not PyPI's gguf) with this interpreter."""
    script = extract_converter(sdist, outfile.parent / "converter")
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}
    proc = subprocess.run([sys.executable, str(script), str(model_dir), "--outfile", str(outfile),
                           "--outtype", outtype], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{script} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return outfile
