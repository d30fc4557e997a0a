"""read_wav (backends/common/audio.py): PCM 8/16/24/32-bit and float WAVs, mono and stereo, any
rate to the engine's, and bad files answered with InvalidArgument/NotFound naming the file."""
import struct
import wave

import numpy as np
import pytest

from backends.common.audio import read_wav
from backends.common.errors import InvalidArgument, NotFound

RATE = 16000


def riff(fmt_tag: int, channels: int, rate: int, bits: int, pcm: bytes, extensible: bool = False) -> bytes:
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", 0xFFFE if extensible else fmt_tag, channels, rate, rate * block, block, bits)
    if extensible:
        fmt += struct.pack("<HHI", 22, bits, 0) + struct.pack("<H", fmt_tag) + bytes(14)
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(pcm)) + pcm
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


def pcm16(path, samples, channels=1, rate=RATE):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(samples, dtype="<i2").tobytes())
    return str(path)


def test_pcm16_mono(tmp_path):
    x = read_wav(pcm16(tmp_path / "a.wav", [0, 16384, -32768, 32767]), RATE, 60)
    assert x.dtype == np.float32 and x.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(x, [0, 0.5, -1, 32767 / 32768])


def test_pcm16_stereo_is_averaged(tmp_path):
    x = read_wav(pcm16(tmp_path / "s.wav", [16384, 0, -16384, -16384], channels=2), RATE, 60)
    np.testing.assert_allclose(x, [0.25, -0.5])


@pytest.mark.parametrize(
    "tag,bits,pcm,want",
    [
        (1, 8, bytes([128, 192, 0]), [0, 0.5, -1]),
        (1, 24, b"\x00\x00\x40" + b"\x00\x00\x80", [0.5, -1]),
        (1, 32, struct.pack("<ii", 1 << 30, -(1 << 31)), [0.5, -1]),
        (3, 32, struct.pack("<ff", 0.25, -0.75), [0.25, -0.75]),
        (3, 64, struct.pack("<dd", 0.125, 1.0), [0.125, 1.0]),
    ],
)
@pytest.mark.parametrize("extensible", [False, True])
def test_other_sample_widths(tmp_path, tag, bits, pcm, want, extensible):
    path = tmp_path / "w.wav"
    path.write_bytes(riff(tag, 1, RATE, bits, pcm, extensible))
    np.testing.assert_allclose(read_wav(str(path), RATE, 60), want, atol=1e-6)


def test_other_rates_are_resampled(tmp_path):
    x = read_wav(pcm16(tmp_path / "8k.wav", [1000] * 8000, rate=8000), RATE, 60)
    assert len(x) == 16000
    np.testing.assert_allclose(x, 1000 / 32768, rtol=1e-5)


def test_not_a_wav_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "song.mp3"
    path.write_bytes(b"ID3\x04" + bytes(100))
    with pytest.raises(InvalidArgument, match=r"song\.mp3: not a WAV file \(RIFF/WAVE\): send 16 kHz mono WAV"):
        read_wav(str(path), RATE, 60)


@pytest.mark.parametrize(
    "data,match",
    [
        (b"RIFF\x04\x00\x00\x00WAVE", "WAV without a fmt or data chunk"),
        (riff(2, 1, RATE, 4, bytes(8)), "WAV format tag 2 with 4 bits is not supported"),
        (riff(1, 1, 100, 16, bytes(8)), "WAV with 1 channels at 100 Hz is not audio"),
        (riff(3, 1, RATE, 32, struct.pack("<f", float("nan"))), "NaN or infinite"),
    ],
)
def test_bad_wavs_are_invalid_argument(tmp_path, data, match):
    path = tmp_path / "bad.wav"
    path.write_bytes(data)
    with pytest.raises(InvalidArgument, match=match) as info:
        read_wav(str(path), RATE, 60)
    assert str(path) in info.value.message


def test_audio_over_the_limit_names_the_limit(tmp_path):
    with pytest.raises(InvalidArgument, match="3 s of audio is over the limit of 2 s per request"):
        read_wav(pcm16(tmp_path / "long.wav", [0] * (3 * RATE)), RATE, 2)


def test_missing_file_is_not_found(tmp_path):
    with pytest.raises(NotFound, match="missing.wav"):
        read_wav(str(tmp_path / "missing.wav"), RATE, 60)
