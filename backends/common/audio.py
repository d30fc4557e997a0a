"""Helpers for TTS backends: request validation and WAV writing (stdlib wave + numpy)."""

import os
import wave

from .errors import InvalidArgument, NotFound, require


def validate_tts(request) -> None:
    require(bool(request.text.strip()), "text is empty")
    require(bool(request.dst), "dst (the output WAV path) is empty")
    parent = os.path.dirname(os.path.abspath(request.dst))
    if not os.path.isdir(parent):
        raise NotFound(f"output directory does not exist: {parent}")


def write_wav(path: str, samples, sample_rate: int) -> None:
    """Write mono float samples in [-1, 1] (numpy array, tensor or list) as 16-bit PCM WAV."""
    import numpy as np  # noqa: PLC0415

    if hasattr(samples, "detach"):
        samples = samples.detach().float().cpu().numpy()
    data = np.asarray(samples, dtype=np.float32).reshape(-1)
    if data.size == 0:
        raise InvalidArgument("the model produced no audio")
    pcm = (np.clip(data, -1.0, 1.0) * 32767.0).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(pcm.tobytes())
