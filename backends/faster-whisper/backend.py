"""LocalAI faster-whisper backend: AudioTranscription and AudioTranscriptionStream.

faster-whisper's ``transcribe`` returns a lazy generator of segments: it is consumed here
(materialised into a list) before the reply is built, so every segment reaches the client
(LocalAI issue #5990: segments missing over gRPC). Compute type: int8 on CPU unless
``LOCALAI_WHISPER_COMPUTE_TYPE`` says otherwise (e.g. float32); float16 on CUDA.
"""

import os

from backends.common.errors import InvalidArgument, NotFound, require
from backends.common.model_files import check_file, check_model
from backends.common.server import BaseServicer, run
from backends.proto import backend_pb2

# Model names faster-whisper downloads by itself (only when the hub is reachable).
KNOWN_SIZES = {
    "tiny", "tiny.en", "base", "base.en", "small", "small.en", "medium", "medium.en",
    "large-v1", "large-v2", "large-v3", "large", "distil-large-v2", "distil-medium.en",
    "distil-small.en", "distil-large-v3", "large-v3-turbo", "turbo",
}
CPU_COMPUTE_TYPES = {"int8", "int8_float32", "float32", "int16"}
EXPECTS = ("a CTranslate2 Whisper model folder (model.bin, config.json, tokenizer.json or vocabulary), as "
           "ct2-transformers-converter writes it")


def compute_type_for(device: str, environ=None) -> str:
    environ = os.environ if environ is None else environ
    override = environ.get("LOCALAI_WHISPER_COMPUTE_TYPE", "").strip()
    if device == "cpu":
        if override and override not in CPU_COMPUTE_TYPES:
            raise InvalidArgument(
                f"LOCALAI_WHISPER_COMPUTE_TYPE={override} is not usable on CPU: use one of "
                + ", ".join(sorted(CPU_COMPUTE_TYPES))
            )
        return override or "int8"
    return override or "float16"


def select_device(environ=None) -> str:
    environ = os.environ if environ is None else environ
    forced = environ.get("LOCALAI_DEVICE", "").strip().lower()
    if forced in ("cpu", "cuda"):
        return forced
    if forced:
        raise InvalidArgument(f"LOCALAI_DEVICE={forced}: faster-whisper runs on cpu or cuda only")
    try:
        import ctranslate2

        return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    except Exception:
        return "cpu"


def validate_transcript(request) -> None:
    require(bool(request.dst), "dst (the audio file path) is empty")
    if not os.path.isfile(request.dst):
        raise NotFound(f"audio file not found: {request.dst}")
    require(request.temperature >= 0, f"temperature must be >= 0, got {request.temperature}")


def failed_in_audio_decoding(exc: BaseException) -> bool:
    """True when ``exc`` was raised inside faster-whisper's ``decode_audio`` (a file that is not
    decodable audio: PyAV's InvalidDataError, or IndexError when it has no audio stream)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "decode_audio":
            return True
        tb = tb.tb_next
    return False


NS_PER_SECOND = 1_000_000_000


def to_segment(index: int, seg) -> "backend_pb2.TranscriptSegment":
    """faster-whisper Segment (seconds) -> TranscriptSegment; times in nanoseconds, as
    LocalAI's backends send them (its Go side reads them as a time.Duration)."""
    words = [
        backend_pb2.TranscriptWord(start=int(w.start * NS_PER_SECOND), end=int(w.end * NS_PER_SECOND), text=w.word)
        for w in (getattr(seg, "words", None) or [])
    ]
    return backend_pb2.TranscriptSegment(
        id=index,
        start=int(seg.start * NS_PER_SECOND),
        end=int(seg.end * NS_PER_SECOND),
        text=seg.text,
        tokens=list(seg.tokens or []),
        words=words,
    )


class FasterWhisperServicer(BaseServicer):
    model_expects = EXPECTS

    def resolve_path(self, request):
        if request.Model in KNOWN_SIZES and not os.path.exists(os.path.join(request.ModelPath or "", request.Model)):
            return request.Model
        return super().resolve_path(request)

    def load(self, request, path):
        if os.path.exists(path):
            check_model(path, EXPECTS, directory=True, required=["model.bin"])
            check_file(os.path.join(path, "model.bin"), ("ctranslate2",), EXPECTS)
            # faster-whisper takes a string that is not a folder for a Hub repo id: an absolute
            # path keeps a local model local whatever the working directory.
            path = os.path.abspath(path)
        from faster_whisper import WhisperModel

        device = select_device()
        self.device = device
        return WhisperModel(
            path,
            device=device,
            compute_type=compute_type_for(device),
            cpu_threads=max(0, request.Threads),
        )

    def _transcribe(self, request):
        validate_transcript(request)
        model = self.require_model()
        kwargs = dict(
            language=request.language or None,
            task="translate" if request.translate else "transcribe",
            initial_prompt=request.prompt or None,
            word_timestamps="word" in request.timestamp_granularities,
        )
        if request.temperature > 0:
            kwargs["temperature"] = request.temperature
        try:
            # Decodes the whole file (PyAV) before returning the lazy segment generator.
            segments, info = model.transcribe(request.dst, **kwargs)
        except Exception as exc:
            if failed_in_audio_decoding(exc):
                raise InvalidArgument(
                    f"cannot decode {request.dst} as audio: {type(exc).__name__}: {exc}"
                ) from exc
            raise
        return segments, info

    def _result(self, segs, info):
        return backend_pb2.TranscriptResult(
            segments=[to_segment(i, s) for i, s in enumerate(segs)],
            text="".join(s.text for s in segs).strip(),
            language=info.language or "",
            duration=float(info.duration or 0.0),
        )

    def AudioTranscription(self, request, context):
        segments, info = self._transcribe(request)
        segs = list(segments)  # materialise the generator: this is where decoding happens
        return self._result(segs, info)

    def AudioTranscriptionStream(self, request, context):
        segments, info = self._transcribe(request)
        segs = []
        for seg in segments:
            segs.append(seg)
            yield backend_pb2.TranscriptStreamResponse(delta=seg.text)
        yield backend_pb2.TranscriptStreamResponse(final_result=self._result(segs, info))


def main(argv=None):
    run(FasterWhisperServicer, argv)


if __name__ == "__main__":
    main()
