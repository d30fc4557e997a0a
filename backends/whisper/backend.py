"""LocalAI whisper backend on whisper.cpp 1.8.5 (engines/whisper-cpp, C++ on ggml).

The PEX carries one libwhisper.so per CPU level (fallback, avx2, avx512) and the Silero VAD
model converted at build time with whisper.cpp's converter; the best library this CPU supports is
loaded with ctypes (engines/whisper-cpp/binding.py), as LocalAI's run.sh picks one from
/proc/cpuinfo. No torch, onnxruntime or ctranslate2.

- LoadModel(Model=<ggml Whisper model>): AudioTranscription, AudioTranscriptionStream (and VAD
  with the bundled model).
- LoadModel(Model=""): VAD only, with the bundled Silero VAD model.

Audio: `dst` is a WAV file (PCM 8/16/24/32-bit or IEEE float, any channel count, any sample
rate: downmixed and resampled to 16 kHz mono). LocalAI converts uploads to 16 kHz mono WAV
with ffmpeg before calling the backend. Times: segment and word start/end in nanoseconds, as
LocalAI's backends send them (whisper.cpp has them in milliseconds); VAD segments in seconds.
"""
from __future__ import annotations

import contextlib
import importlib.resources
import os
import threading

from backends.common.audio import read_wav
from backends.common.engine import EngineServicer, PackagedLibrary
from backends.common.errors import InvalidArgument, NotFound, require
from backends.common.model_files import check_file
from backends.common.paths import model_file
from backends.common.server import run
from backends.common.streaming import StreamStopped, stream_from_thread
from backends.common.vad_segments import speech_segments
from backends.proto import backend_pb2

from .binding import SAMPLE_RATE, Library, WhisperError

MAX_AUDIO_SECONDS = 4 * 3600  # whisper_full takes an int sample count; bound memory too
# 10 min of 16 kHz audio per VAD call (38.4 MB of floats: inside gRPC's 50 MB message limit,
# which answers RESOURCE_EXHAUSTED above it).
MAX_VAD_SAMPLES = 600 * SAMPLE_RATE
ENGINE_DIR = "engines/whisper-cpp"


class Engine(PackagedLibrary, Library):
    """The best libwhisper.so of this PEX for this CPU, extracted to a real file for ctypes."""

    engine_dir, library, override_env = ENGINE_DIR, "libwhisper.so", "LOCALAI_WHISPER_CPU"

    def __init__(self):
        super().__init__(__package__, verbose=bool(os.environ.get("LOCALAI_WHISPER_VERBOSE")))

    def bundled_vad_model(self) -> str:
        root = importlib.resources.files(__package__).joinpath(ENGINE_DIR, "silero-vad")
        models = sorted(p.name for p in root.iterdir() if p.name.endswith(".bin")) if root.is_dir() else []
        if len(models) != 1:
            raise NotFound(f"this PEX holds no bundled Silero VAD model ({ENGINE_DIR}/silero-vad/*.bin: {models})")
        return str(self.files.enter_context(importlib.resources.as_file(root.joinpath(models[0]))))


NS_PER_MS = 1_000_000


def _word(w):
    return backend_pb2.TranscriptWord(start=w.start_ms * NS_PER_MS, end=w.end_ms * NS_PER_MS, text=w.text)


def to_segment(seg, duration_ms: int) -> "backend_pb2.TranscriptSegment":
    """Times clamped to the audio: whisper.cpp takes them from timestamp tokens, which a model
    may place past the end of the audio (the last window is padded to 30 s)."""
    clamp = lambda t: max(0, min(int(t), duration_ms))  # noqa: E731 (a one-line local helper)
    for w in seg.words:
        w.start_ms, w.end_ms = clamp(w.start_ms), clamp(w.end_ms)
    return backend_pb2.TranscriptSegment(id=seg.index, start=clamp(seg.start_ms) * NS_PER_MS,
                                         end=clamp(seg.end_ms) * NS_PER_MS,
                                         text=seg.text, tokens=seg.tokens, words=[_word(w) for w in seg.words])


class Loaded:
    """What LoadModel loaded: a whisper model (None for VAD-only) and the VAD model (lazily)."""

    def __init__(self, engine: Engine, whisper, threads: int):
        self.engine, self.whisper, self.threads = engine, whisper, threads
        self._vad, self._lock = None, threading.Lock()

    def vad(self):
        with self._lock:
            if self._vad is None:
                try:
                    self._vad = self.engine.load_vad(self.engine.bundled_vad_model(), n_threads=self.threads)
                except WhisperError as e:
                    raise InvalidArgument(str(e)) from None
            return self._vad

    def close(self):
        for m in (self.whisper, self._vad):
            if m is not None:
                m.close()


class WhisperServicer(EngineServicer):
    allow_empty_model = True

    def new_engine(self):
        return Engine()

    def load(self, request, path):
        threads = max(request.Threads, 0)
        if not path:
            loaded = Loaded(self.engine, None, threads or 1)
            loaded.vad()  # fail LoadModel, not the first VAD call, if the bundled model is broken
            return loaded
        path = model_file(path, (".bin",), "ggml Whisper model")
        check_file(path, ("ggml",), "a ggml Whisper model (.bin, whisper.cpp's convert-h5-to-ggml.py)")
        try:
            model = self.engine.load(path)
        except WhisperError as e:
            raise InvalidArgument(str(e)) from None
        return Loaded(self.engine, model, threads or 1)

    def _prepare(self, request):
        loaded: Loaded = self.require_model()
        if loaded.whisper is None:
            raise InvalidArgument("the loaded model is VAD only (LoadModel with an empty Model): load a ggml "
                                  "Whisper model to transcribe")
        require(bool(request.dst), "dst (the audio file path) is empty")
        if not os.path.isfile(request.dst):
            raise NotFound(f"audio file not found: {request.dst}")
        require(request.temperature >= 0 and request.temperature <= 1.0,
                f"temperature must be in [0, 1], got {request.temperature}")
        samples = read_wav(request.dst, SAMPLE_RATE, MAX_AUDIO_SECONDS)
        require(len(samples) > 0, f"{request.dst}: no audio samples")
        kw = dict(language=request.language, translate=request.translate,
                  n_threads=int(request.threads) or loaded.threads, prompt=request.prompt,
                  temperature=request.temperature, words="word" in request.timestamp_granularities)
        return loaded.whisper, samples, kw

    def _transcribe(self, model, samples, kw, on_segment=None, stop=None):
        try:
            return model.transcribe(samples, on_segment=on_segment, stop=stop, **kw)
        except ValueError as e:
            raise InvalidArgument(str(e)) from None

    @staticmethod
    def _result(segs, lang, samples):
        return backend_pb2.TranscriptResult(
            segments=[to_segment(s, len(samples) * 1000 // SAMPLE_RATE) for s in segs],
            text="".join(s.text for s in segs).strip(),
            language=lang,
            duration=len(samples) / SAMPLE_RATE,
        )

    def AudioTranscription(self, request, context):
        model, samples, kw = self._prepare(request)
        segs, lang = self._transcribe(model, samples, kw)
        return self._result(segs, lang, samples)

    def AudioTranscriptionStream(self, request, context):
        """One delta per segment as whisper.cpp decodes it (its new-segment callback), then the
        final result."""
        model, samples, kw = self._prepare(request)

        def work(emit, stop):
            def on_segment(seg):
                # Called from C, where an exception cannot stop whisper.cpp: its abort callback
                # polls `stop` instead.
                with contextlib.suppress(StreamStopped):
                    emit(backend_pb2.TranscriptStreamResponse(delta=seg.text))

            segs, lang = self._transcribe(model, samples, kw, on_segment=on_segment, stop=stop)
            emit(backend_pb2.TranscriptStreamResponse(final_result=self._result(segs, lang, samples)))

        yield from stream_from_thread(work, context, name="whisper-full")

    def VAD(self, request, context):
        import numpy as np

        require(len(request.audio) > 0, "audio is empty: send 16 kHz mono float samples")
        require(len(request.audio) <= MAX_VAD_SAMPLES,
                f"audio has {len(request.audio)} samples, over the limit of {MAX_VAD_SAMPLES} (10 min at 16 kHz): "
                "split it")
        loaded: Loaded = self.require_model()
        audio = np.asarray(request.audio, dtype=np.float32)
        require(bool(np.isfinite(audio).all()), "audio contains NaN or infinite samples")
        # whisper.cpp computes the probabilities; the segments follow Silero's own rules, as
        # silero-vad:cpu does. whisper.cpp's whisper_vad_segments_from_probs (what LocalAI's Go
        # whisper backend calls) also merges segments under 200 ms apart, so it answers one
        # segment where Silero answers two for a 100-200 ms pause (backends/common/vad_segments.py).
        try:
            segs = speech_segments(loaded.vad().probabilities(audio), total_samples=len(audio))
        except WhisperError as e:
            raise InvalidArgument(f"VAD failed: {e}") from None
        return backend_pb2.VADResponse(segments=[backend_pb2.VADSegment(start=s, end=e) for s, e in segs])


def main(argv=None):
    run(WhisperServicer, argv)


if __name__ == "__main__":
    main()
