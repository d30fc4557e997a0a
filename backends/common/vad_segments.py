"""Silero VAD's segmentation rules: per-window speech probabilities -> (start, end) seconds.

The rules of the silero-vad package's get_speech_timestamps (threshold hysteresis with
neg_threshold = threshold - 0.15, min_speech_duration_ms, min_silence_duration_ms,
speech_pad_ms; LocalAI's silero-vad backend uses the same defaults), written without torch so
that every VAD backend applies them to its model's probabilities: backends/silero-vad (onnxruntime)
and backends/whisper (whisper.cpp's Silero VAD on ggml). whisper.cpp's own
whisper_vad_segments_from_probs adds a step Silero does not have: it merges segments whose raw gap
is under 200 ms (hard-coded), so two utterances 100-200 ms apart become one segment there and two
in Silero (docs/benchmarks.md, "VAD segment parity").
"""

SAMPLE_RATE = 16000
WINDOW = 512  # samples per model call at 16 kHz


def speech_segments(
    probs,
    threshold: float = 0.5,
    min_speech_ms: int = 250,
    min_silence_ms: int = 100,
    pad_ms: int = 30,
    window: int = WINDOW,
    sample_rate: int = SAMPLE_RATE,
    total_samples: int = None,
):
    """[(start_s, end_s)] from per-window speech probabilities (Silero's hysteresis rules)."""
    neg_threshold = max(threshold - 0.15, 0.01)
    min_speech = sample_rate * min_speech_ms / 1000
    min_silence = sample_rate * min_silence_ms / 1000
    pad = int(sample_rate * pad_ms / 1000)
    total = total_samples if total_samples is not None else len(probs) * window
    segments, start, temp_end, triggered = [], 0, 0, False
    for i, p in enumerate(probs):
        pos = i * window
        if p >= threshold and temp_end:
            temp_end = 0
        if p >= threshold and not triggered:
            triggered, start = True, pos
            continue
        if p < neg_threshold and triggered:
            if not temp_end:
                temp_end = pos
            if pos - temp_end < min_silence:
                continue
            if temp_end - start > min_speech:
                segments.append([start, temp_end])
            triggered, temp_end = False, 0
    if triggered and total - start > min_speech:
        segments.append([start, total])
    for k, seg in enumerate(segments):
        seg[0] = max(0, seg[0] - pad)
        seg[1] = min(total, seg[1] + pad)
        if k > 0 and seg[0] < segments[k - 1][1]:
            mid = (seg[0] + segments[k - 1][1]) // 2
            segments[k - 1][1], seg[0] = mid, mid
    return [(s / sample_rate, e / sample_rate) for s, e in segments]
