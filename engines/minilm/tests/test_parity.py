"""Embeddings through the C ABI (ctypes) against sentence-transformers, every corpus string,
every CPU level the machine supports, every quantisation."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import QUANTS, level_params  # pants: no-infer-dep
from corpus import parity_corpus  # pants: no-infer-dep

# f32 is the parity gate; quantised files are lossy by construction.
MIN_COSINE = {"f32": 0.99999, "f16": 0.9999, "q8_0": 0.998}


@pytest.fixture(scope="module")
def reference(st_model):
    texts = parity_corpus()
    return texts, st_model.encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)


@pytest.mark.parametrize("quant", QUANTS)
@pytest.mark.parametrize("level", level_params())
def test_cosine_vs_sentence_transformers(level, quant, libs, gguf_models, reference):
    texts, ref = reference
    model = libs[level].load(gguf_models[quant])
    ours = model.embed(texts)
    cos = (ours * ref).sum(axis=1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1))
    worst = int(np.argmin(cos))
    print(json.dumps({"level": level, "quant": quant, "n": len(texts), "min_cosine": float(cos.min()),
                      "mean_cosine": float(cos.mean()), "worst_text": texts[worst][:60]}, ensure_ascii=False))
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert cos.min() >= MIN_COSINE[quant], f"{level}/{quant}: min cosine {cos.min():.7f} on {texts[worst][:60]!r}"


@pytest.mark.parametrize("level", level_params())
def test_batch_equals_single(level, libs, gguf_models):
    model = libs[level].load(gguf_models["f32"])
    texts = ["first sentence", "", "a much longer second sentence with more tokens in it"]
    batch = model.embed(texts)
    for i, t in enumerate(texts):
        np.testing.assert_array_equal(model.embed([t])[0], batch[i])
