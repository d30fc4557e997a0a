"""Models and references for the whisper.cpp tests, made offline in the test.

- `tiny_whisper(out)`: a 1-layer random multilingual-sized Whisper (shape="tiny": Whisper tiny's
  4 layers, d_model 384, for benchmarks) (transformers,
  save_pretrained), converted with whisper.cpp's own models/convert-h5-to-ggml.py taken from
  the pinned pywhispercpp sdist (3rdparty/native:pywhispercpp-sdist).
- `reference_greedy(...)`: transformers' Whisper decoding greedily with the logit rules
  whisper.cpp applies when timestamps are off (whisper_process_logits in src/whisper.cpp).
- `packaged_file(pex, suffix)`: a file (libwhisper.so, the converted Silero VAD) out of the packed PEX.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

SDIST = Path("3rdparty/native/pywhispercpp-1.5.1.tar.gz")
N_VOCAB = 51865  # multilingual Whisper: whisper.cpp derives every special token id from n_vocab
EOT = 50257


def sdist_member(member: str, out: Path) -> Path:
    """Extracts `<top>/<member>` of the pinned sdist to `out`."""
    with tarfile.open(SDIST) as tf:
        m = next(m for m in tf.getmembers() if m.name.partition("/")[2] == member)
        out.write_bytes(tf.extractfile(m).read())
    return out


def _bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


# A random Whisper's shape: the tests' 1+1 layers, or Whisper tiny's (openai/whisper-tiny's
# config.json) for benchmarks where the arithmetic must be a real model's.
SHAPES = {
    "test": dict(layers=1, heads=2, d_model=64),
    "tiny": dict(layers=4, heads=6, d_model=384),
}


def tiny_whisper_hf(out: Path, seed: int = 0, shape: str = "test") -> Path:
    """A random Whisper with Whisper's real vocabulary size and special-token layout, of a SHAPES
    shape (ffn 4 x d_model, as whisper.cpp assumes); vocab.json holds the 256 byte tokens plus some words (the
    rest of the ids are whisper.cpp's padding tokens, as for any vocab shorter than n_vocab)."""
    import numpy as np
    import torch
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    out.mkdir(parents=True, exist_ok=True)
    b2u = _bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for w in ("hello", "world", "Ġhello", "Ġworld", "Ġthe", "Ġa", "Ġtest", "Ġvoice", "Ġspeech", "ing"):
        vocab.setdefault(w, len(vocab))
    (out / "vocab.json").write_text(json.dumps(vocab))
    (out / "added_tokens.json").write_text("{}")
    dims = SHAPES[shape]
    cfg = WhisperConfig(
        vocab_size=N_VOCAB, num_mel_bins=80, encoder_layers=dims["layers"], decoder_layers=dims["layers"],
        encoder_attention_heads=dims["heads"], decoder_attention_heads=dims["heads"], d_model=dims["d_model"],
        encoder_ffn_dim=4 * dims["d_model"], decoder_ffn_dim=4 * dims["d_model"], max_source_positions=1500,
        max_target_positions=448, decoder_start_token_id=50258, eos_token_id=EOT, pad_token_id=EOT, bos_token_id=EOT,
    )
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(cfg)
    with torch.no_grad():
        # Wider logit gaps than the default init: greedy decisions are then not near-ties, so
        # float rounding differences between ggml and torch cannot flip them.
        for p in model.parameters():
            if p.dim() >= 2:
                p.mul_(4.0)
    model.save_pretrained(out)
    fe = WhisperFeatureExtractor(feature_size=80)
    fe.save_pretrained(out)
    # whisper.cpp's converter reads the mel filterbank from openai-whisper's assets: the same
    # Slaney-normalised 80-bin filterbank transformers computes.
    assets = out / "whisper-repo" / "whisper" / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    np.savez(assets / "mel_filters.npz", mel_80=np.asarray(fe.mel_filters.T, dtype=np.float32))
    return out


def convert_to_ggml(hf_dir: Path, out_dir: Path, f32: bool = False) -> Path:
    """whisper.cpp's models/convert-h5-to-ggml.py (from the pinned sdist) on a saved HF model.
    f16 by default: whisper.cpp 1.8.5 aborts on an all-f32 model (its conv1d im2col asserts an
    f16 kernel), so the backend refuses those at load."""
    out_dir.mkdir(parents=True, exist_ok=True)
    script = sdist_member("whisper.cpp/models/convert-h5-to-ggml.py", out_dir / "convert-h5-to-ggml.py")
    argv = [sys.executable, str(script), str(hf_dir), str(hf_dir / "whisper-repo"), str(out_dir)]
    if f32:
        argv.append("use-f32")
    subprocess.run(argv, check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    return out_dir / ("ggml-model-f32.bin" if f32 else "ggml-model.bin")


def tiny_whisper(out: Path, f32: bool = False, shape: str = "test") -> tuple[Path, Path]:
    """(HF model dir, ggml model file)."""
    hf = tiny_whisper_hf(out / "hf", shape=shape)
    return hf, convert_to_ggml(hf, out / "ggml", f32)


def as_converted(model) -> None:
    """Rounds the weights the converter stores as f16 (every tensor of 2+ dims except the
    positional embeddings) to f16 precision, so the reference uses the same weight values."""
    import torch

    with torch.no_grad():
        for name, p in model.state_dict().items():
            if p.squeeze().dim() >= 2 and "embed_positions" not in name:
                p.copy_(p.half().float())


def reference_greedy(hf_dir: Path, audio, max_tokens: int) -> list[int]:
    """Greedy decoding with transformers' Whisper under whisper.cpp's logit rules for
    no_timestamps=true, suppress_blank=true, English transcription: prompt [sot, en, transcribe,
    notimestamps]; every special token (ids > eot) suppressed; eot and " " suppressed at the
    first step; stop at eot or after max_tokens."""
    import torch
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration

    model = WhisperForConditionalGeneration.from_pretrained(hf_dir).eval()
    as_converted(model)
    fe = WhisperFeatureExtractor.from_pretrained(hf_dir)
    feats = fe(audio, sampling_rate=16000, return_tensors="pt").input_features
    space = json.loads((hf_dir / "vocab.json").read_text())["Ġ"]
    sot, en, transcribe, notimestamps = 50258, 50259, 50359, 50363
    ids = [sot, en, transcribe, notimestamps]
    out: list[int] = []
    past = None
    with torch.no_grad():
        enc = model.model.encoder(feats).last_hidden_state
        step_ids = ids
        for step in range(max_tokens):
            res = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([step_ids]), past_key_values=past,
                        use_cache=True)
            past = res.past_key_values
            logits = res.logits[0, -1].clone()
            logits[EOT + 1:] = -float("inf")
            if step == 0:
                logits[EOT] = logits[space] = -float("inf")
            tok = int(torch.argmax(logits))
            if tok == EOT:
                break
            out.append(tok)
            step_ids = [tok]
    return out


def packaged_file(pex: Path, suffix: str) -> Path:
    """The one loose file of the packed PEX (a directory) whose path ends with `suffix`."""
    found = [p for p in pex.rglob("*") if p.is_file() and p.as_posix().endswith(suffix)]
    assert len(found) == 1, (suffix, found)
    return found[0]
