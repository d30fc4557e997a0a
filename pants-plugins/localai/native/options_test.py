from __future__ import annotations

import pytest

from localai.native.options import CpuLevelOptionError, kept_engines, wrong_platform_engines

ENGINES = [("fallback", "minilm:fallback"), ("avx2", "minilm:avx2"), ("avx512", "minilm:avx512")]
ARM_ENGINES = [("arm64-neon", "minilm:arm64-neon"), ("arm64-dotprod", "minilm:arm64-dotprod")]
# The table's own `platforms`, as the rule passes them (CpuLevelTable.platforms).
PLATFORM_OF = {"fallback": "x86_64", "avx2": "x86_64", "avx512": "x86_64", "arm64-neon": "aarch64", "arm64-dotprod": "aarch64"}


def test_empty_option_keeps_every_level_the_backend_lists() -> None:
    assert kept_engines("backends/minilm-ggml:cpu", ENGINES, [], PLATFORM_OF) == ["minilm:fallback", "minilm:avx2", "minilm:avx512"]


def test_levels_left_out_of_the_option_are_left_out_of_the_backend() -> None:
    assert kept_engines("backends/minilm-ggml:cpu", ENGINES, ["avx2", "fallback"], PLATFORM_OF) == ["minilm:fallback", "minilm:avx2"]


def test_a_backend_without_engines_is_unaffected() -> None:
    # As the rule calls it for a backend without engines: no level table read, so no platforms.
    assert kept_engines("backends/silero-vad:cpu", [], ["fallback", "avx2"], {}) == []


def test_unknown_level_is_refused_naming_the_table() -> None:
    with pytest.raises(CpuLevelOptionError, match=r"^backends/common/cpu_levels.json: .*unknown level\(s\) \['avx3'\]\. Use levels"):
        kept_engines("backends/minilm-ggml:cpu", ENGINES, ["fallback", "avx3"], PLATFORM_OF)


def test_an_option_that_leaves_a_backend_no_engine_names_the_backend() -> None:
    with pytest.raises(CpuLevelOptionError, match=r"^backends/whisper:cpu: .*leaves none of its engine levels \['avx2'\]"):
        kept_engines("backends/whisper:cpu", [("avx2", "whisper-cpp:avx2")], ["fallback"], PLATFORM_OF)


def test_the_option_restricts_only_the_platforms_it_names_a_level_of() -> None:
    # CI's x86_64 levels leave an arm64 variant all of its levels; naming one arm64 level keeps that one.
    assert kept_engines("backends/minilm-ggml:cpu-arm64", ARM_ENGINES, ["fallback", "avx2"], PLATFORM_OF) == [
        "minilm:arm64-neon", "minilm:arm64-dotprod"]
    assert kept_engines("backends/minilm-ggml:cpu-arm64", ARM_ENGINES, ["avx2", "arm64-neon"], PLATFORM_OF) == ["minilm:arm64-neon"]
    assert kept_engines("backends/minilm-ggml:cpu", ENGINES, ["avx2", "arm64-neon"], PLATFORM_OF) == ["minilm:avx2"]


def test_engines_of_another_machine_are_named() -> None:
    mixed = [("arm64-neon", "engines/minilm:arm64-neon"), ("avx2", "engines/minilm:avx2")]
    assert wrong_platform_engines(mixed, "aarch64", PLATFORM_OF) == ["engines/minilm:avx2 (cpu_level avx2: x86_64)"]
    assert wrong_platform_engines(mixed, "x86_64", PLATFORM_OF) == ["engines/minilm:arm64-neon (cpu_level arm64-neon: aarch64)"]
    assert wrong_platform_engines(ARM_ENGINES, "aarch64", PLATFORM_OF) == []
