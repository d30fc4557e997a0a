"""WordPiece ids from the C++ tokenizer (through the C ABI) against the Hugging Face tokenizer
that sentence-transformers uses, at truncation 256 (the model's max_seq_length) and 512."""
from __future__ import annotations

import json

import pytest
from corpus import tokenizer_corpus  # pants: no-infer-dep


@pytest.fixture(scope="module")
def hf_tokenizer(st_model):
    return st_model.tokenizer


@pytest.mark.parametrize("max_tokens", [256, 512])
def test_ids_match_huggingface(max_tokens, libs, gguf_models, hf_tokenizer):
    lib = next(iter(libs.values()))
    model = lib.load(gguf_models["q8_0"], max_tokens=max_tokens)
    texts = tokenizer_corpus()
    assert len(texts) >= 200
    mismatches = []
    for t in texts:
        ref = hf_tokenizer(t, truncation=True, max_length=max_tokens)["input_ids"]
        ours = model.tokenize(t)
        if ours != ref:
            mismatches.append({"text": t[:80], "ref": ref[:20], "ours": ours[:20]})
    print(json.dumps({"max_tokens": max_tokens, "strings": len(texts), "agree": len(texts) - len(mismatches)}))
    assert not mismatches, json.dumps(mismatches[:5], ensure_ascii=False, indent=1)


def test_invalid_utf8_does_not_crash(libs, gguf_models):
    model = next(iter(libs.values())).load(gguf_models["q8_0"])
    for b in (b"\xff\xfe", b"abc\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"):
        ids = model.tokenize(b)
        assert ids[0] == 101 and ids[-1] == 102
