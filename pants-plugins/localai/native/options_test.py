from __future__ import annotations

import pytest

from localai.native.options import CpuLevelOptionError, kept_engines

ENGINES = [("fallback", "minilm:fallback"), ("avx2", "minilm:avx2"), ("avx512", "minilm:avx512")]


def test_empty_option_keeps_every_level_the_backend_lists() -> None:
    assert kept_engines("backends/minilm-ggml:cpu", ENGINES, []) == ["minilm:fallback", "minilm:avx2", "minilm:avx512"]


def test_levels_left_out_of_the_option_are_left_out_of_the_backend() -> None:
    assert kept_engines("backends/minilm-ggml:cpu", ENGINES, ["avx2", "fallback"]) == ["minilm:fallback", "minilm:avx2"]


def test_a_backend_without_engines_is_unaffected() -> None:
    assert kept_engines("backends/silero-vad:cpu", [], ["fallback"]) == []


def test_unknown_level_is_refused_naming_the_table() -> None:
    with pytest.raises(CpuLevelOptionError, match=r"^backends/common/cpu_levels.json: .*unknown level\(s\) \['avx3'\]\. Use levels"):
        kept_engines("backends/minilm-ggml:cpu", ENGINES, ["fallback", "avx3"])


def test_an_option_that_leaves_a_backend_no_engine_names_the_backend() -> None:
    with pytest.raises(CpuLevelOptionError, match=r"^backends/whisper:cpu: .*leaves none of its engine levels \['avx2'\]"):
        kept_engines("backends/whisper:cpu", [("avx2", "whisper-cpp:avx2")], ["fallback"])
