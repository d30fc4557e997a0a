"""What the C and Python sides must agree on, checked against each other (no library needed):
- the status codes: include/minilm.h's `minilm_status` enum (every enumerator, explicit or
  implicit value) against binding.py's STATUS, by name, value and count; and every code has a
  message in minilm_strerror;
- the CPU levels: both readers of backends/common/cpu_levels.json (the C build's cmake_driver.py
  and the runtime's cpu_levels.py, which binding.py uses) derive the same CPU flags per level.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from engines.minilm import binding

ROOT = Path(__file__).resolve().parents[3]
HEADER = ROOT / "engines/minilm/include/minilm.h"
SOURCE = ROOT / "engines/minilm/src/minilm.cpp"
DRIVER = ROOT / "pants-plugins/localai/native/scripts/cmake_driver.py"
TABLE = ROOT / "backends/common/cpu_levels.json"


def enum_values(header_text: str, enum: str = "minilm_status") -> dict[str, int]:
    """The enumerators of `typedef enum ... {...} <enum>;` in declaration order, with C's rules
    for implicit values (previous + 1, starting at 0). Anything else in the body is an error,
    so an enumerator this parser cannot read fails the test instead of being skipped."""
    m = re.search(r"typedef\s+enum\s*\w*\s*\{(.*?)\}\s*" + enum + r"\s*;", header_text, re.S)
    assert m, f"no `typedef enum {{...}} {enum};`"
    body = re.sub(r"/\*.*?\*/|//[^\n]*", "", m.group(1), flags=re.S)
    values: dict[str, int] = {}
    nxt = 0
    for item in (i.strip() for i in body.split(",")):
        if not item:
            continue
        em = re.fullmatch(r"([A-Za-z_]\w*)\s*(?:=\s*(-?(?:0[xX][0-9a-fA-F]+|\d+)))?", item)
        assert em, f"{enum}: cannot read the enumerator {item!r}"
        name, value = em.group(1), em.group(2)
        assert name not in values, f"{enum}: {name} declared twice"
        nxt = int(value, 0) if value is not None else nxt
        values[name] = nxt
        nxt += 1
    return values


def agree(header_text: str, status: dict[int, str]) -> None:
    """binding.py's {code: name} must be exactly the header's enum."""
    values = enum_values(header_text)
    assert len(set(values.values())) == len(values), f"minilm_status: duplicate values {values}"
    assert len(status) == len(values), f"binding.py has {len(status)} codes, minilm.h {len(values)}"
    assert status == {v: n for n, v in values.items()}


def test_status_codes_agree_with_the_header():
    text = HEADER.read_text()
    assert len(enum_values(text)) >= 10
    agree(text, binding.STATUS)
    assert binding.CODE == {n: v for n, v in enum_values(text).items()}


def test_every_status_code_has_a_message_in_strerror():
    body = re.search(r"minilm_strerror\(minilm_status \w+\)\s*\{(.*?)\n\}", SOURCE.read_text(), re.S)
    assert body, f"{SOURCE}: no minilm_strerror definition"
    cases = re.findall(r"case\s+(MINILM_\w+)\s*:", body.group(1))
    assert sorted(cases) == sorted(enum_values(HEADER.read_text()))


GOOD = HEADER.read_text()
DRIFTS = {
    "value": GOOD.replace("MINILM_ERR_COMPUTE = 8", "MINILM_ERR_COMPUTE = 10"),
    "name": GOOD.replace("MINILM_ERR_BAD_FORMAT", "MINILM_ERR_MALFORMED"),
    "count": GOOD.replace("MINILM_ERR_INTERNAL = 9", "MINILM_ERR_INTERNAL = 9,\n    MINILM_ERR_TIMEOUT"),
    "implicit value": GOOD.replace("MINILM_ERR_EMPTY_BATCH = 5,", "MINILM_ERR_NEW,\n    MINILM_ERR_EMPTY_BATCH = 5,"),
    "unreadable": GOOD.replace("MINILM_ERR_COMPUTE = 8", "MINILM_ERR_COMPUTE = (1 << 3)"),
}


@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_the_check_fails_on_drift(drift):
    assert DRIFTS[drift] != GOOD
    with pytest.raises(AssertionError):
        agree(DRIFTS[drift], binding.STATUS)


def test_implicit_values_follow_c():
    text = "typedef enum e { A, B = 5, C, /* x, y */ D = 0x10, E } minilm_status;"
    assert enum_values(text) == {"A": 0, "B": 5, "C": 6, "D": 16, "E": 17}


def _driver():
    spec = importlib.util.spec_from_file_location("cmake_driver", DRIVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_and_runtime_read_the_same_cpu_flags_per_level():
    d = _driver()
    for level, needs in binding.CPU_LEVELS.items():
        assert set(d.CpuLevel(str(TABLE), level).cpu_flags) == needs, level
    assert list(binding.CPU_LEVELS)[-1] == "fallback" and binding.CPU_LEVELS["fallback"] == set()


def test_build_and_runtime_agree_on_every_platform_and_the_runtime_picks_per_platform(monkeypatch):
    from backends.common import cpu_levels

    d = _driver()
    arm = cpu_levels.levels_of("aarch64")
    assert list(arm) == ["arm64-i8mm", "arm64-sve", "arm64-dotprod", "arm64-neon"]
    for level, needs in {**cpu_levels.levels_of("x86_64"), **arm}.items():
        assert set(d.CpuLevel(str(TABLE), level).cpu_flags) == needs, level
    # On an aarch64 machine the runtime reads `Features` (a Graviton 2: dotprod and fp16, no SVE).
    monkeypatch.setattr(cpu_levels, "CPU_LEVELS", arm)
    graviton2 = {"fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "atomics", "fphp", "asimdhp",
                 "cpuid", "asimdrdm", "lrcpc", "dcpop", "asimddp", "ssbs"}
    assert cpu_levels.pick_level(list(arm), "NO_OVERRIDE", graviton2) == "arm64-dotprod"
    assert cpu_levels.pick_level(list(arm), "NO_OVERRIDE", graviton2 | {"sve", "i8mm"}) == "arm64-i8mm"
    assert cpu_levels.pick_level(list(arm), "NO_OVERRIDE", set()) == "arm64-neon"
    assert cpu_levels.pick_level(["arm64-sve", "arm64-neon"], "NO_OVERRIDE", graviton2) == "arm64-neon"
    assert cpu_levels.levels_of("riscv64") == {}
