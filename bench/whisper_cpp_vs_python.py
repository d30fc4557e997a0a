"""whisper.cpp (engines/whisper-cpp through backends/whisper's binding) against the Python stacks,
one measurement per child process (load time, run time, peak RSS of that process):

- VAD on 60 s of audio: whisper.cpp's Silero VAD (ggml probabilities, Silero's segmentation rules:
  what backends/whisper answers) vs onnxruntime on the silero-vad package's ONNX (the silero-vad
  backend's loop) vs the silero-vad package itself on torch (load_silero_vad(onnx=False) +
  get_speech_timestamps: the Python path the seed compared).
- Transcription of the same audio with the same tiny random Whisper: whisper.cpp (f16 ggml,
  greedy, no fallback) vs transformers (greedy generate, f32) vs faster-whisper (CTranslate2 int8,
  greedy, no fallback); the CTranslate2 model is converted from the very weights whisper.cpp's
  file holds, with a 51,865-token tokenizer.json laid out as Whisper's (byte tokens, fillers,
  the special tokens at their ids), which CTranslate2's converter and faster-whisper need.

  python bench/whisper_cpp_vs_python.py --lib dist/engines/whisper-cpp/avx2/libwhisper.so \
      --vad-model dist/engines/whisper-cpp/silero-vad/silero-vad-v6.2.3-ggml.bin --work /tmp/wbench \
      --sdist <pywhispercpp-1.5.1.tar.gz>

Run from the repository root in an environment with numpy, onnxruntime, silero-vad, torch,
transformers, faster-whisper (the tests resolve plus onnxruntime/silero-vad). Prints a Markdown
table (medians of --repeat runs).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r'''
import json, os, resource, sys, time
t_start = time.perf_counter()
kind, args = sys.argv[1], json.loads(sys.argv[2])
import numpy as np
audio = np.load(args["audio"])
if kind == "vad-whisper.cpp":
    from backends.whisper.binding import Library
    t0 = time.perf_counter()
    from backends.common.vad_segments import speech_segments
    m = Library(args["lib"]).load_vad(args["vad_model"], n_threads=1)
    load = time.perf_counter() - t0
    t0 = time.perf_counter(); speech_segments(m.probabilities(audio), total_samples=len(audio))
    run = time.perf_counter() - t0
elif kind == "vad-torch":
    import torch
    torch.set_num_threads(1)
    from silero_vad import get_speech_timestamps, load_silero_vad
    t0 = time.perf_counter(); model = load_silero_vad(onnx=False); load = time.perf_counter() - t0
    t0 = time.perf_counter(); get_speech_timestamps(torch.from_numpy(audio), model); run = time.perf_counter() - t0
elif kind == "vad-onnxruntime":
    import importlib.util, onnxruntime
    spec = importlib.util.find_spec("silero_vad")
    path = os.path.join(spec.submodule_search_locations[0], "data", "silero_vad.onnx")
    t0 = time.perf_counter()
    o = onnxruntime.SessionOptions(); o.inter_op_num_threads = 1; o.intra_op_num_threads = 1
    s = onnxruntime.InferenceSession(path, sess_options=o, providers=["CPUExecutionProvider"])
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    state = np.zeros((2, 1, 128), np.float32); ctx = np.zeros((1, 64), np.float32); sr = np.array(16000, np.int64)
    for off in range(0, len(audio), 512):
        ch = audio[off:off + 512]
        ch = np.pad(ch, (0, 512 - len(ch)))
        x = np.concatenate([ctx, ch[None]], 1)
        out, state = s.run(None, {"input": x, "state": state, "sr": sr}); ctx = x[:, -64:]
    run = time.perf_counter() - t0
elif kind == "asr-whisper.cpp":
    from backends.whisper.binding import Library
    t0 = time.perf_counter(); m = Library(args["lib"]).load(args["ggml"]); load = time.perf_counter() - t0
    t0 = time.perf_counter()
    m.transcribe(audio, language="en", no_timestamps=True, no_fallback=True, n_threads=args["threads"])
    run = time.perf_counter() - t0
    tokens = sum(len(seg) for seg in m.token_ids())
elif kind == "asr-transformers":
    import torch
    torch.set_num_threads(args["threads"])
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration
    t0 = time.perf_counter()
    model = WhisperForConditionalGeneration.from_pretrained(args["hf"]).eval()
    fe = WhisperFeatureExtractor.from_pretrained(args["hf"])
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    feats = fe(audio, sampling_rate=16000, return_tensors="pt").input_features
    with torch.no_grad():
        model.generate(feats, decoder_input_ids=torch.tensor([[50258, 50259, 50359, 50363]]),
                       max_new_tokens=args["tokens"], min_new_tokens=args["tokens"], do_sample=False, num_beams=1)
    run = time.perf_counter() - t0
    tokens = args["tokens"]
elif kind == "asr-faster-whisper":
    from faster_whisper import WhisperModel
    t0 = time.perf_counter()
    m = WhisperModel(args["ct2"], device="cpu", compute_type="int8", cpu_threads=args["threads"])
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    # whisper.cpp with no_timestamps suppresses every token above EOT (task, language, timestamps): the
    # same here. CTranslate2 stops this model at about half its max_length (224 tokens for 448 =
    # prompt + max_new_tokens, 112 for 224), so it gets the whole 448 context and the row reports
    # the tokens it decoded (223 against 220 for the others).
    segs, info = m.transcribe(audio, language="en", beam_size=1, temperature=0.0, without_timestamps=True,
                              condition_on_previous_text=False, vad_filter=False, max_new_tokens=444,
                              suppress_tokens=list(range(50258, 51865)), suppress_blank=False)
    tokens = sum(len(seg.tokens) for seg in segs)
    run = time.perf_counter() - t0
# VmHWM, not getrusage's ru_maxrss: Linux carries the forking parent's peak across exec into
# ru_maxrss (the parent here has torch loaded to make the model), VmHWM is this image's own.
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"load_s": load, "run_s": run, "tokens": locals().get("tokens", 0), "peak_rss_mb": hwm / 1024,
                  "process_s": time.perf_counter() - t_start}))
'''


def ct2_of_the_same_model(hf: Path, out: Path) -> Path:
    """The tiny Whisper's own weights as CTranslate2, for faster-whisper: a tokenizer.json with the
    ids whisper.cpp derives from n_vocab = 51,865 (bytes and words of vocab.json, fillers up to
    50,256, then <|endoftext|>, <|startoftranscript|>, 99 languages with <|en|> first, tasks,
    1,501 timestamps), saved next to a copy of the HF model and converted with it."""
    import shutil

    import ctranslate2
    from faster_whisper.tokenizer import _LANGUAGE_CODES
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GenerationConfig, PreTrainedTokenizerFast

    from tests.integration.whisper_cpp_models import EOT, N_VOCAB

    vocab = json.loads((hf / "vocab.json").read_text())
    for i in range(len(vocab), EOT):
        vocab[f"<|filler{i}|>"] = i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    langs = ["en"] + [c for c in _LANGUAGE_CODES if c not in ("en", "yue")]
    tasks = ["translate", "transcribe", "startoflm", "startofprev", "nospeech", "notimestamps"]
    tok.add_special_tokens(["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{c}|>" for c in langs]
                           + [f"<|{t}|>" for t in tasks] + [f"<|{i * 0.02:.2f}|>" for i in range(1501)])
    assert tok.get_vocab_size() == N_VOCAB and tok.token_to_id("<|notimestamps|>") == 50363, tok.get_vocab_size()
    work = out.parent / f"{out.name}-hf"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(hf, work)
    eot = "<|endoftext|>"
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eot, bos_token=eot, unk_token=eot, pad_token=eot).save_pretrained(work)
    GenerationConfig(
        decoder_start_token_id=50258, eos_token_id=EOT, pad_token_id=EOT, is_multilingual=True,
        lang_to_id={f"<|{c}|>": tok.token_to_id(f"<|{c}|>") for c in langs},
        task_to_id={"transcribe": 50359, "translate": 50358}, no_timestamps_token_id=50363,
        suppress_tokens=[], begin_suppress_tokens=[], alignment_heads=[[0, 0]],
    ).save_pretrained(work)
    ctranslate2.converters.TransformersConverter(str(work), copy_files=["tokenizer.json"]).convert(str(out), force=True)
    (out / "preprocessor_config.json").write_text(json.dumps(
        {"feature_size": 80, "sampling_rate": 16000, "hop_length": 160, "chunk_length": 30, "n_fft": 400}))
    return out


def child(kind: str, args: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, kind, json.dumps(args)], check=True, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": os.getcwd(), "OMP_NUM_THREADS": str(args["threads"])})
    return json.loads(out.stdout.strip().splitlines()[-1])


def synthetic_audio(work: Path) -> dict[int, Path]:
    """60 s of speech bursts, silences and faint noise, and its first 10 s, as work/audio<secs>.npy."""
    import numpy as np

    from tests.integration.tiny_models import SAMPLE_RATE, synthetic_voice

    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    parts = []
    while sum(map(len, parts)) < 60 * SAMPLE_RATE:
        parts += [synthetic_voice(3.0, seed=len(parts)), np.zeros(SAMPLE_RATE, np.float32),
                  (rng.standard_normal(SAMPLE_RATE) * 0.005).astype(np.float32)]
    audio60 = np.concatenate(parts)[: 60 * SAMPLE_RATE]
    paths = {secs: work / f"audio{secs}.npy" for secs in (60, 10)}
    np.save(paths[60], audio60)
    np.save(paths[10], audio60[: 10 * SAMPLE_RATE])
    return paths


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--vad-model", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip", action="append", default=[])
    p.add_argument("--sdist", default="3rdparty/native/pywhispercpp-1.5.1.tar.gz",
                   help="the pinned pywhispercpp sdist (its converter makes the tiny model): "
                        "pants package 3rdparty/native:pywhispercpp-sdist, or PyPI's file checked by sha256")
    a = p.parse_args()
    sys.path.insert(0, os.getcwd())
    from tests.integration import whisper_cpp_models
    from tests.integration.whisper_cpp_models import tiny_whisper

    whisper_cpp_models.SDIST = Path(a.sdist)

    work = Path(a.work)
    synthetic_audio(work)
    if not (work / "tiny" / "ggml" / "ggml-model.bin").exists():
        tiny_whisper(work / "tiny")
    ct2 = work / "tiny-ct2"
    common = dict(lib=os.path.abspath(a.lib), vad_model=os.path.abspath(a.vad_model), threads=a.threads,
                  hf=str(work / "tiny" / "hf"), ggml=str(work / "tiny" / "ggml" / "ggml-model.bin"), tokens=220)
    if "asr-faster-whisper" not in a.skip and not ct2.exists():
        ct2_of_the_same_model(work / "tiny" / "hf", ct2)
    common["ct2"] = str(ct2)
    rows = []
    for kind, audio, secs in (("vad-whisper.cpp", "audio60", 60), ("vad-onnxruntime", "audio60", 60),
                              ("vad-torch", "audio60", 60),
                              ("asr-whisper.cpp", "audio10", 10), ("asr-transformers", "audio10", 10),
                              ("asr-faster-whisper", "audio10", 10)):
        if kind in a.skip:
            continue
        runs = [child(kind, {**common, "audio": str(work / f"{audio}.npy")}) for _ in range(a.repeat)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        rows.append((kind, secs, med))
        print(kind, json.dumps(med), flush=True)
    print("\n| what | audio | load (s) | run (s) | real-time factor | tokens | peak RSS (MB) |\n|---|---|---|---|---|---|---|")
    for kind, secs, m in rows:
        print(f"| {kind} | {secs} s | {m['load_s']:.3f} | {m['run_s']:.3f} | {m['run_s'] / secs:.4f} | {m['tokens']:.0f} "
              f"| {m['peak_rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
