"""The audio the VAD tests feed whisper.cpp's Silero VAD (and silero-vad:cpu), and the VAD call.

- `synthetic_speech()`: 1 s silence, 3 s of a synthetic voice, 1.5 s silence.
- `short_pause_speech()`: espeak-ng utterances with a 220 ms and a 400 ms break, in low noise.
- `vad_cases(...)`: those two plus silence, low noise and loud noise (16 kHz mono float32).
- `vad(stub, audio)`: the VAD RPC's segments as (start, end) seconds.
"""
from __future__ import annotations

import numpy as np

from backends.proto import backend_pb2
from tests.integration.registry import debian_tool
from tests.integration.tiny_models import SAMPLE_RATE, espeak_voice, synthetic_voice

# Two short pauses between three utterances: the 220 ms break leaves ~160 ms below Silero's exit
# threshold (Silero splits: 100 ms of silence suffice; whisper.cpp merges gaps under 200 ms), the
# 400 ms break ~340 ms (both split). Measured with espeak-ng 1.51: docs/benchmarks.md.
SHORT_PAUSES = (
    '<speak>The quick brown fox jumps over the lazy dog.<break time="220ms"/>'
    'Then it runs into the forest and hides.<break time="400ms"/>Nobody sees it again.</speak>'
)


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SAMPLE_RATE), np.float32)


def synthetic_speech() -> np.ndarray:
    return np.concatenate([_silence(1.0), synthetic_voice(3.0), _silence(1.5)])


def short_pause_speech() -> np.ndarray:
    """espeak-ng speech (SHORT_PAUSES) in low noise with 0.5 s of silence around it."""
    debian_tool("espeak-ng")
    voice = espeak_voice(SHORT_PAUSES, ssml=True)
    assert voice is not None and len(voice) > 3 * SAMPLE_RATE
    audio = np.concatenate([_silence(0.5), voice, _silence(0.5)])
    noise = np.random.default_rng(3).standard_normal(len(audio)) * 0.003
    return (audio + noise).astype(np.float32)


def vad_cases(speech: np.ndarray, pauses: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "speech": speech,
        "short-pauses": pauses,
        "silence": np.zeros(2 * SAMPLE_RATE, np.float32),
        "noise": (rng.standard_normal(2 * SAMPLE_RATE) * 0.005).astype(np.float32),
        "loud-noise": (rng.standard_normal(3 * SAMPLE_RATE) * 0.3).astype(np.float32),
    }


def vad(stub, audio, timeout: float = 120) -> list[tuple[float, float]]:
    res = stub.VAD(backend_pb2.VADRequest(audio=np.asarray(audio, np.float32).tolist()), timeout=timeout)
    return [(s.start, s.end) for s in res.segments]
