from __future__ import annotations

import json

import pytest

from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from localai.package import VariantLockfile, VariantLockfileRequest
from localai.testutil import backend_files, make_rule_runner, resolve_options
from localai.variant import Variant, VariantRequest


def _variant(rule_runner, name: str, accel: str) -> Variant:
    return rule_runner.request(Variant, [VariantRequest(Address(f"backends/{name}", target_name=accel), accel)])


def test_missing_lockfile_says_why_and_the_command_that_makes_it() -> None:
    rule_runner = make_rule_runner(
        QueryRule(Variant, [VariantRequest]), QueryRule(VariantLockfile, [VariantLockfileRequest])
    )
    rule_runner.write_files(backend_files("bark", {"rocm": ""}))
    rule_runner.set_options(resolve_options("bark", ["rocm"]))
    variant = _variant(rule_runner, "bark", "rocm")
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(VariantLockfile, [VariantLockfileRequest(variant, "the rocm7.0 index is unreachable here")])
    msg = str(e.value)
    assert "backends/bark:rocm: lockfiles/bark-rocm.lock does not exist" in msg
    assert "Why: the rocm7.0 index is unreachable here" in msg
    assert "https://download.pytorch.org/whl/rocm7.0" in msg
    assert "./pants generate-lockfiles --resolve=bark-rocm" in msg


def test_lockfile_sha256_is_of_the_committed_bytes() -> None:
    import hashlib

    rule_runner = make_rule_runner(
        QueryRule(Variant, [VariantRequest]), QueryRule(VariantLockfile, [VariantLockfileRequest])
    )
    content = "// header\n" + json.dumps({"locked_resolves": []})
    rule_runner.write_files({**backend_files("bark", {"cpu": ""}), "lockfiles/bark-cpu.lock": content})
    rule_runner.set_options(resolve_options("bark", ["cpu"]))
    lock = rule_runner.request(VariantLockfile, [VariantLockfileRequest(_variant(rule_runner, "bark", "cpu"), None)])
    assert lock.sha256 == hashlib.sha256(content.encode()).hexdigest()
