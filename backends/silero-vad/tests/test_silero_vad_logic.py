from backends.common.testing import load_backend_module

backend = load_backend_module(__file__)


def test_no_speech_no_segments():
    assert backend.speech_segments([0.0] * 100) == []


def test_one_speech_run_becomes_one_padded_segment():
    probs = [0.0] * 31 + [0.9] * 31 + [0.0] * 31  # windows of 512 samples = 32 ms
    segs = backend.speech_segments(probs)
    assert len(segs) == 1
    start, end = segs[0]
    assert abs(start - (31 * 512 / 16000 - 0.03)) < 1e-6
    assert abs(end - (62 * 512 / 16000 + 0.03)) < 1e-6


def test_short_blip_is_dropped_and_short_gap_is_bridged():
    assert backend.speech_segments([0.0] * 10 + [0.9] * 3 + [0.0] * 20) == []
    probs = [0.9] * 20 + [0.0] * 2 + [0.9] * 20 + [0.0] * 20
    assert len(backend.speech_segments(probs)) == 1


def test_speech_until_end_is_closed_at_total():
    segs = backend.speech_segments([0.0] * 5 + [0.9] * 30, total_samples=35 * 512)
    assert segs[-1][1] == 35 * 512 / 16000
