from __future__ import annotations

import pytest

from localai.model.prelock import END, PinBlock, PinBlockError, inputs_digest, split_pin_block

PATH = "3rdparty/accelerators/variants/demo-cpu.txt"
HEAD = "# pip options\n--find-links file://${LOCALAI_WHEELHOUSE}/cpu/\n"
INPUTS = dict(
    requirements=["b", "a==1"],
    pip_options=["--find-links x"],
    indexes=["https://pypi.org/simple/"],
    find_links=[],
    python="3.11",
    platform="x86_64-manylinux_2_28",
)


def _block() -> PinBlock:
    return PinBlock.create("demo-cpu", "uv 0.13.8", "x86_64-manylinux_2_28, CPython 3.11", inputs_digest(**INPUTS), ["Zed==2", "abc==1.0"])


def _file(block: PinBlock) -> str:
    return HEAD + "".join(line + "\n" for line in block.lines())


def test_a_block_round_trips_and_its_pins_are_sorted_exact_lines() -> None:
    block = _block()
    assert block.pins == ("abc==1.0", "Zed==2")
    rest, parsed = split_pin_block(_file(block), path=PATH, resolve="demo-cpu")
    assert rest == HEAD and parsed == block
    assert split_pin_block(HEAD, path=PATH, resolve="demo-cpu") == (HEAD, None)
    with pytest.raises(PinBlockError, match="not exact `name==version` pins: torch>=2"):
        PinBlock.create("demo-cpu", "uv", "t", block.inputs, ["torch>=2"])


def test_the_inputs_digest_follows_what_the_resolve_reads_not_requirement_order() -> None:
    same = inputs_digest(**{**INPUTS, "requirements": ["a==1", "b"]})
    assert same == inputs_digest(**INPUTS)
    for key, value in (("requirements", ["a==2", "b"]), ("pip_options", []), ("indexes", []), ("python", "3.12"), ("platform", "aarch64-manylinux_2_28")):
        assert inputs_digest(**{**INPUTS, key: value}) != same, key


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("abc==1.0", "abc==1.1"), "edited by hand"),
        (lambda t: t.replace("Zed==2\n", "Zed==2\nextra==3\n"), "edited by hand"),
        (lambda t: t.replace(END + "\n", ""), f"no single begin line and `{END}` after it"),
        (lambda t: t.replace("; pins sha256:", "; pins:"), "is not its record"),
    ],
)
def test_a_hand_edited_or_broken_block_is_refused_naming_the_file_and_the_goal(edit, message) -> None:
    with pytest.raises(PinBlockError, match=message) as e:
        split_pin_block(edit(_file(_block())), path=PATH, resolve="demo-cpu")
    assert str(e.value).startswith(PATH) and "./pants localai-prelock --resolve=demo-cpu" in str(e.value)
