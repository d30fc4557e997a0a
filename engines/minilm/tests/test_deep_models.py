"""Models deeper than all-MiniLM-L6-v2: the graph is sized from the loaded model, so a deep
BERT embeds a full 32-text batch (one packed graph) instead of overflowing ggml's graph,
which aborts the process. 24 layers is BERT-large's depth; 256 the loader's limit."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import _convert_module, level_params  # pants: no-infer-dep

TEXTS = [f"text number {i} about deep models" for i in range(32)]


def random_bert(model_dir, layers: int, hidden=32, heads=4, ff=64):
    """A random BERT in sentence-transformers' layout, with all-MiniLM-L6-v2's tokenizer."""
    from safetensors.numpy import save_file

    conv = _convert_module()
    src = conv.default_model_dir()
    model_dir.mkdir()
    for name in ("vocab.txt", "tokenizer_config.json", "sentence_bert_config.json"):
        shutil.copy(src / name, model_dir / name)
    shutil.copytree(src / "1_Pooling", model_dir / "1_Pooling")
    vocab = len((src / "vocab.txt").read_text(encoding="utf-8").split("\n")) - 1
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(hidden_size=hidden, num_attention_heads=heads, intermediate_size=ff, num_hidden_layers=layers)
    (model_dir / "config.json").write_text(json.dumps(cfg))
    rng = np.random.default_rng(layers)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    t = {
        "embeddings.word_embeddings.weight": w(vocab, hidden),
        "embeddings.position_embeddings.weight": w(cfg["max_position_embeddings"], hidden),
        "embeddings.token_type_embeddings.weight": w(2, hidden),
        "embeddings.LayerNorm.weight": np.ones(hidden, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(hidden, np.float32),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name, (rows, cols) in {
            "attention.self.query": (hidden, hidden), "attention.self.key": (hidden, hidden),
            "attention.self.value": (hidden, hidden), "attention.output.dense": (hidden, hidden),
            "intermediate.dense": (ff, hidden), "output.dense": (hidden, ff),
        }.items():
            t[p + name + ".weight"], t[p + name + ".bias"] = w(rows, cols), w(rows)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + norm + ".weight"], t[p + norm + ".bias"] = np.ones(hidden, np.float32), np.zeros(hidden, np.float32)
    save_file(t, str(model_dir / "model.safetensors"))
    out = model_dir / "model.gguf"
    conv.convert(model_dir, out, "f32")
    return out


@pytest.fixture(scope="module", params=[24, 256], ids=lambda n: f"{n}-layers")
def deep_gguf(request, tmp_path_factory):
    return random_bert(tmp_path_factory.mktemp("deep") / "bert", request.param)


@pytest.mark.parametrize("level", level_params())
def test_deep_bert_embeds_a_32_text_batch(libs, level, deep_gguf):
    model = libs[level].load(deep_gguf, n_threads=2)
    try:
        batch = model.embed(TEXTS)
        assert batch.shape == (32, 32) and np.isfinite(batch).all()
        assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
        # Rows of a packed batch are computed as each text alone.
        assert np.array_equal(batch[7], model.embed([TEXTS[7]])[0])
    finally:
        model.close()
