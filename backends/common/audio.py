"""Audio helpers of the backends: TTS request validation, WAV writing (stdlib wave + numpy) and
WAV reading for speech-to-text (any PCM/float WAV to mono float32 at the engine's rate)."""

import os
import struct
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
    import numpy as np

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


def read_wav(path: str, sample_rate: int, max_seconds: float):
    """Mono float32 samples in [-1, 1] at ``sample_rate`` of a WAV file (numpy array).

    Reads PCM 8/16/24/32-bit and IEEE float 32/64 (also as WAVE_FORMAT_EXTENSIBLE), any channel
    count (averaged) and any rate (resampled linearly). Standard library parsing rather than
    ``wave``, which refuses float and extensible files. Bad input is InvalidArgument naming the
    file and the cause; a missing file NotFound; audio over ``max_seconds`` InvalidArgument
    naming the limit (checked before resampling allocates).
    """
    import numpy as np

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise NotFound(f"audio file {path}: {e.strerror}") from None
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise InvalidArgument(f"{path}: not a WAV file (RIFF/WAVE): send 16 kHz mono WAV (LocalAI converts with ffmpeg)")
    pos, fmt, pcm = 12, None, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = data[pos + 8:pos + 8 + size]
        if cid == b"fmt " and len(body) >= 16:
            fmt = struct.unpack("<HHIIHH", body[:16])
            if fmt[0] == 0xFFFE and len(body) >= 26:  # WAVE_FORMAT_EXTENSIBLE: the sub-format's tag
                fmt = (struct.unpack("<H", body[24:26])[0],) + fmt[1:]
        elif cid == b"data":
            pcm = body
        pos += 8 + size + (size & 1)
    if fmt is None or pcm is None:
        raise InvalidArgument(f"{path}: WAV without a fmt or data chunk")
    tag, channels, rate, _, _, bits = fmt
    require(channels >= 1 and rate >= 1000, f"{path}: WAV with {channels} channels at {rate} Hz is not audio")
    if tag == 1 and bits in (8, 16, 32):
        dtype = {8: np.uint8, 16: "<i2", 32: "<i4"}[bits]
        x = np.frombuffer(pcm[: len(pcm) // (bits // 8) * (bits // 8)], dtype=dtype).astype(np.float32)
        x = (x - 128.0) / 128.0 if bits == 8 else x / float(2 ** (bits - 1))
    elif tag == 1 and bits == 24:
        b = np.frombuffer(pcm[: len(pcm) // 3 * 3], dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        x = (np.where(v >= 1 << 23, v - (1 << 24), v) / float(1 << 23)).astype(np.float32)
    elif tag == 3 and bits in (32, 64):
        x = np.frombuffer(pcm[: len(pcm) // (bits // 8) * (bits // 8)], dtype="<f4" if bits == 32 else "<f8")
        x = x.astype(np.float32)
    else:
        raise InvalidArgument(f"{path}: WAV format tag {tag} with {bits} bits is not supported "
                              "(PCM 8/16/24/32-bit or IEEE float 32/64)")
    x = x[: len(x) // channels * channels].reshape(-1, channels).mean(axis=1)
    require(len(x) / rate <= max_seconds,
            f"{path}: {len(x) / rate:.0f} s of audio is over the limit of {max_seconds:.0f} s per request")
    if rate != sample_rate and len(x):
        n = int(round(len(x) * sample_rate / rate))
        x = np.interp(np.arange(n) * (rate / sample_rate), np.arange(len(x)), x).astype(np.float32)
    if not np.isfinite(x).all():
        raise InvalidArgument(f"{path}: audio contains NaN or infinite samples")
    return np.ascontiguousarray(x, dtype=np.float32)
