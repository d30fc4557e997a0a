"""LocalAI's model-identity check (wrong-model protection, LocalAI issue #10952).

A successful LoadModel records ``ModelOptions.Model``; the guarded RPCs' requests carry
``ModelIdentity``. Both non-empty and different: NOT_FOUND with the sentinel that
LocalAI's router looks for. Either side empty: no check.
"""
from typing import Optional

MISMATCH_SENTINEL = "model identity mismatch"

GUARDED_RPCS = frozenset(
    {
        "Predict", "PredictStream", "Embedding", "TokenizeString", "GenerateImage",
        "GenerateVideo", "TTS", "TTSStream", "SoundGeneration", "AudioTranscription",
        "AudioTranscriptionStream", "Detect", "Depth", "FaceVerify", "FaceAnalyze",
        "VoiceVerify", "VoiceAnalyze", "VoiceEmbed", "Rerank", "TokenClassify", "Score",
        "VAD", "Diarize", "SoundDetection", "AudioTransform",
    }
)


def mismatch(loaded: str, requested: str) -> Optional[str]:
    """The NOT_FOUND message when ``requested`` names another model than ``loaded``, else None."""
    if not loaded or not requested or loaded == requested:
        return None
    return f"{MISMATCH_SENTINEL}: loaded {loaded!r}, requested {requested!r}"
