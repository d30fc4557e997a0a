from __future__ import annotations

import pytest
from pants.engine.fs import EMPTY_DIGEST

from localai.errors import LocalAIError
from localai.goals.claims import TestCatalog, TestEntry
from localai.goals.level_claims import levels_run, render_levels
from localai.native.cpu_levels import CpuLevelTable

TABLE = CpuLevelTable(EMPTY_DIGEST, ("avx2", "fallback", "arm64-neon"),
                      (("avx2", "x86_64"), ("fallback", "x86_64"), ("arm64-neon", "aarch64")))


def test_each_level_lists_its_ci_tests_else_its_by_hand_ones() -> None:
    catalog = TestCatalog((
        TestEntry("engines/e/tests:tests", "d", False, ("localai-runs-level:fallback", "localai-runs-level:avx2")),
        TestEntry("tests:arm", "d", False, ("localai-runs-level:arm64-neon", "other")),
        TestEntry("tests:by-hand", "d", True, ("by-hand", "localai-runs-level:avx2", "localai-runs-level:fallback")),
        TestEntry("tests:none", "d", False, ()),
    ))
    lines = render_levels(catalog, TABLE).splitlines()
    assert "| avx2 | x86_64 | `engines/e/tests:tests` | `tests:by-hand` |" in lines
    assert "| arm64-neon | aarch64 | `tests:arm` | - |" in lines
    assert not any("tests:none" in line for line in lines)
    lonely = TestCatalog((TestEntry("tests:by-hand", "d", True, ("by-hand", "localai-runs-level:avx2")),))
    assert "| fallback | x86_64 | no | - |" in render_levels(lonely, TABLE).splitlines()


def test_an_unknown_level_names_the_target_and_the_levels() -> None:
    with pytest.raises(LocalAIError) as err:
        levels_run(TestEntry("tests:x", "d", False, ("localai-runs-level:avx9",)), TABLE)
    assert str(err.value).startswith("tests:x: the tag 'localai-runs-level:avx9' names no CPU level of backends/common/cpu_levels.json.")
    assert "['avx2', 'fallback', 'arm64-neon']" in str(err.value)
