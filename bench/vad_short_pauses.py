"""VAD segments on espeak-ng speech with short pauses: where whisper.cpp and Silero disagree, and why.

  python bench/vad_short_pauses.py --lib dist/engines/whisper-cpp/avx2/libwhisper.so \
      --vad-model dist/engines/whisper-cpp/silero-vad/silero-vad-v6.2.3-ggml.bin [--breaks 100,150,...]

Two espeak-ng sentences separated by an SSML <break> of each length, 0.5 s of silence around
them, low noise (sigma 0.003). For each: the segments of
  silero      onnxruntime on the silero-vad package's ONNX with Silero's framing (each window
              prefixed with the previous window's last 64 samples: what silero-vad:cpu runs), cut
              by the silero-vad package's own get_speech_timestamps_from_probs;
  onnx/wf     the same ONNX model fed whisper.cpp's framing (each window reflect-padded alone),
              cut by the same rules: what the framing alone changes;
  ggml        whisper.cpp's probabilities (f16 conv weights), cut by the same rules: what
              backends/whisper now answers;
  whisper.cpp whisper.cpp's own whisper_vad_segments_from_probs with its defaults (what LocalAI's
              Go whisper backend answers): the same hysteresis plus a merge of gaps under 200 ms.
and the shortest run of windows below Silero's exit threshold (0.35) between the sentences, with
the probability margin there: how close each path is to flipping.

Needs numpy, onnxruntime, silero-vad (with torch, for its own rules) and espeak-ng on PATH; run
from the repository root.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import numpy as np

TEXT = '<speak>The quick brown fox jumps over the lazy dog.<break time="{ms}ms"/>Then it runs into the forest and hides.</speak>'
WINDOW, CONTEXT, RATE = 512, 64, 16000


def onnx_probs(session, audio, whisper_cpp_framing: bool) -> list[float]:
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(CONTEXT, np.float32)
    sr = np.array(RATE, np.int64)
    probs = []
    for off in range(0, len(audio), WINDOW):
        chunk = np.pad(audio[off:off + WINDOW], (0, max(0, WINDOW - len(audio[off:off + WINDOW]))))
        head = chunk[1:CONTEXT + 1][::-1] if whisper_cpp_framing else context
        x = np.concatenate([head, chunk])[None, :].astype(np.float32)
        out, state = session.run(None, {"input": x, "state": state, "sr": sr})
        context = chunk[-CONTEXT:]
        probs.append(float(out[0][0]))
    return probs


def longest_pause(probs) -> int:
    """Milliseconds of the longest run of windows below Silero's exit threshold (0.35) between the
    first and the last window at or above 0.5: the pause as that model sees it (Silero splits when
    it reaches min_silence_duration_ms = 100; whisper.cpp then merges it back if the raw gap is under 200)."""
    above = [i for i, p in enumerate(probs) if p >= 0.5]
    run = best = 0
    for p in probs[above[0]:above[-1]] if above else []:
        run = run + 1 if p < 0.35 else 0
        best = max(best, run)
    return best * WINDOW * 1000 // RATE


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--vad-model", required=True)
    p.add_argument("--breaks", default="100,150,180,200,220,250,280,310,400")
    a = p.parse_args()
    sys.path.insert(0, os.getcwd())
    import onnxruntime
    from silero_vad.utils_vad import get_speech_timestamps_from_probs

    from backends.common.vad_segments import speech_segments
    from backends.whisper.binding import Library
    from tests.integration.tiny_models import espeak_voice

    spec = importlib.util.find_spec("silero_vad")
    session = onnxruntime.InferenceSession(os.path.join(spec.submodule_search_locations[0], "data", "silero_vad.onnx"),
                                           providers=["CPUExecutionProvider"])
    vad = Library(a.lib).load_vad(a.vad_model)
    fmt = lambda segs: " ".join(f"[{s:.2f},{e:.2f}]" for s, e in segs)  # noqa: E731 (a one-line local helper)
    print("| break | silero (onnx, Silero framing + rules) | onnx, whisper.cpp framing | ggml probs + Silero rules "
          "(whisper:cpu) | whisper.cpp's own segments | longest run below 0.35 (silero / ggml) | max abs prob diff ggml vs silero |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(3)
    for ms in map(int, a.breaks.split(",")):
        voice = espeak_voice(TEXT.format(ms=ms), ssml=True)
        z = np.zeros(RATE // 2, np.float32)
        audio = np.concatenate([z, voice, z])
        audio = (audio + rng.standard_normal(len(audio)) * 0.003).astype(np.float32)
        p_sil, p_wf = onnx_probs(session, audio, False), onnx_probs(session, audio, True)
        p_ggml = vad.probabilities(audio)
        ref = [(s["start"] / RATE, s["end"] / RATE) for s in get_speech_timestamps_from_probs(p_sil, audio_length_samples=len(audio))]
        assert ref == speech_segments(p_sil, total_samples=len(audio)), "the port of Silero's rules disagrees"
        ggml = speech_segments(p_ggml, total_samples=len(audio))
        diff = float(np.max(np.abs(np.asarray(p_ggml) - np.asarray(p_sil))))
        print(f"| {ms} ms | {fmt(ref)} | {fmt(speech_segments(p_wf, total_samples=len(audio)))} | {fmt(ggml)} | "
              f"{fmt(vad.segments(audio))} | {longest_pause(p_sil)} / {longest_pause(p_ggml)} ms | {diff:.3f} |", flush=True)


if __name__ == "__main__":
    main()
