"""Our libwhisper.so against upstream whisper.cpp's own default build (issue 45 item 1):
transcription and VAD time on the same ggml model, audio and threads.

  ./pants package engines/whisper-cpp:avx512 engines/whisper-cpp:silero-vad   # the level this CPU runs
  # upstream's default CMake (OpenMP on, GGML_NATIVE on, the host's gcc), by hand, from the SAME
  # pinned archive (3rdparty/native:pywhispercpp-sdist); never part of the build graph:
  tar xzf pywhispercpp-1.5.1.tar.gz && cmake -S pywhispercpp-1.5.1/whisper.cpp -B /tmp/wanchor \\
      -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/wanchor -j 2
  python3.11 bench/whisper_anchor.py --library dist/engines/whisper-cpp/avx512/libwhisper.so \\
      --upstream /tmp/wanchor/src/libwhisper.so --vad-model dist/engines/whisper-cpp/silero-vad/silero-vad-v6.2.3-ggml.bin \\
      --work /tmp/wanchor-work [--shape tiny] [--threads 1 2] [--repeat 3]

Both libraries are driven the same way, through backends/whisper/binding.py (the backend's own
ctypes binding: upstream's libwhisper.so exports the same C API), one child process per
measurement (bench/whisper_cpp_vs_python.py's): greedy transcription of 10 s of synthetic speech
with a random Whisper of --shape (`tiny`: Whisper tiny's 4+4 layers, d_model 384; made here,
converted by whisper.cpp's own converter), and Silero VAD over 60 s. Each repeat runs ours then
upstream's back to back, so load changes fall on both alike. Prints a Markdown table: medians of
the repeats and the median of the paired ratios ours / upstream (below 1: ours is faster).
Run from the repository root in an environment with numpy, torch and transformers.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.getcwd())
from bench.whisper_cpp_vs_python import child, synthetic_audio  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--library", type=Path, required=True, help="our libwhisper.so (dist/engines/whisper-cpp/<level>/)")
    p.add_argument("--upstream", type=Path, required=True, help="upstream's libwhisper.so, built by hand")
    p.add_argument("--vad-model", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--shape", default="tiny", help="tests/integration/whisper_cpp_models.py SHAPES")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sdist", default="3rdparty/native/pywhispercpp-1.5.1.tar.gz", help="its converter makes the model")
    a = p.parse_args()
    for path in (a.library, a.upstream, a.vad_model, Path(a.sdist)):
        if not path.exists():
            raise SystemExit(f"{path}: no such file")
    from tests.integration import whisper_cpp_models

    whisper_cpp_models.SDIST = Path(a.sdist)
    audio = synthetic_audio(a.work)
    model = a.work / a.shape / "ggml" / "ggml-model.bin"
    if not model.exists():
        whisper_cpp_models.tiny_whisper(a.work / a.shape, shape=a.shape)
    print("| what | threads | ours (s) | upstream (s) | ratio | tokens ours / upstream | peak RSS ours / upstream (MB) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    # The backend runs Silero VAD on one thread (backends/whisper), so VAD is timed at 1 only.
    for kind, secs, thread_counts in (("asr-whisper.cpp", 10, a.threads), ("vad-whisper.cpp", 60, [1])):
        for threads in thread_counts:
            args = dict(vad_model=str(a.vad_model.resolve()), threads=threads, ggml=str(model), tokens=220,
                        audio=str(audio[secs]))
            runs = [tuple(child(kind, {**args, "lib": str(lib.resolve())}) for lib in (a.library, a.upstream))
                    for _ in range(a.repeat)]
            med = [statistics.median(r[side]["run_s"] for r in runs) for side in (0, 1)]
            ratio = statistics.median(o["run_s"] / u["run_s"] for o, u in runs)
            tokens = "/".join(str(runs[0][side]["tokens"]) for side in (0, 1))
            rss = "/".join(f"{statistics.median(r[side]['peak_rss_mb'] for r in runs):.0f}" for side in (0, 1))
            print(f"| {kind} {secs} s | {threads} | {med[0]:.3f} | {med[1]:.3f} | {ratio:.2f} | {tokens} | {rss} |", flush=True)
            print("  runs ours/upstream: " + "; ".join(f"{o['run_s']:.3f}/{u['run_s']:.3f}" for o, u in runs), file=sys.stderr)


if __name__ == "__main__":
    main()
