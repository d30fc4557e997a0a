"""The variant model every goal reads (variant.BackendVariant), on BUILD files written with the
real `localai_backend` macro, and what packaging asks of it."""
from __future__ import annotations

import hashlib
import json

import pytest
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.target import TransitiveTargets, TransitiveTargetsRequest
from pants.testutil.rule_runner import QueryRule

from localai.model.accelerators import AcceleratorMatrix
from localai.model.requirements import LayeredRequirements, RequirementsOfVariant
from localai.model.variant import (
    AllBackendVariants,
    BackendVariant,
    BackendVariantRequest,
    BackendVariants,
    BackendVariantsRequest,
    MissingLockfileError,
    Variant,
    VariantRequest,
)
from localai.testutil import backend_files, make_rule_runner, repo_file, resolve_options

MATRIX = AcceleratorMatrix.parse(repo_file("3rdparty/accelerators.toml"))
LOCK = "// header\n" + json.dumps({"locked_resolves": []})


def _runner():
    return make_rule_runner(
        QueryRule(BackendVariant, [BackendVariantRequest]),
        QueryRule(BackendVariants, [BackendVariantsRequest]),
        QueryRule(AllBackendVariants, []),
        QueryRule(TransitiveTargets, [TransitiveTargetsRequest]),
        QueryRule(Variant, [VariantRequest]),
        QueryRule(LayeredRequirements, [RequirementsOfVariant]),
    )


def _bark(rule_runner, accels=("cpu", "rocm"), build=None):
    files = backend_files("bark", {a: "" for a in accels})
    if build:
        files["backends/bark/BUILD"] = build
    rule_runner.write_files({**files, "lockfiles/bark-cpu.lock": LOCK})
    rule_runner.set_options(resolve_options("bark", accels))


def test_every_variant_with_its_lockfile_or_why_not() -> None:
    rule_runner = _runner()
    _bark(
        rule_runner,
        build='localai_backend(accelerators=["cpu", "rocm"], version="1.2.3", size_budget_mb={"cpu": 77}, '
        'not_lockable_here={"rocm": "the rocm7.0 index is unreachable here"})\n',
    )
    variants = rule_runner.request(AllBackendVariants, [])
    assert [str(v.address) for v in variants] == ["backends/bark:cpu", "backends/bark:rocm"]
    cpu, rocm = variants
    assert cpu.lockfile.path == "lockfiles/bark-cpu.lock"
    assert cpu.lockfile.sha256 == hashlib.sha256(LOCK.encode()).hexdigest()
    assert (cpu.version, cpu.size_budget_mb) == ("1.2.3", 77)
    assert rocm.lockfile is None
    assert rocm.size_budget_mb == MATRIX.accelerators["rocm"].size_budget_mb  # no override: the accelerator's
    assert [str(v.address) for v in variants.locked()] == ["backends/bark:cpu"]
    with pytest.raises(MissingLockfileError) as e:
        rocm.locked()
    msg = str(e.value)
    assert "backends/bark:rocm: lockfiles/bark-rocm.lock does not exist" in msg
    assert "Why: the rocm7.0 index is unreachable here" in msg
    assert "https://download.pytorch.org/whl/rocm7.0" in msg
    assert "./pants generate-lockfiles --resolve=bark-rocm" in msg


def test_a_variant_without_a_reason_says_how_to_make_its_lockfile() -> None:
    rule_runner = _runner()
    _bark(rule_runner, accels=("cpu", "cuda13"))
    v = rule_runner.request(BackendVariant, [BackendVariantRequest(Address("backends/bark", target_name="cuda13"))])
    assert v.why_unlocked == "not generated yet: `./pants generate-lockfiles --resolve=bark-cuda13`"


def test_only_variants_among_the_addresses_given() -> None:
    rule_runner = _runner()
    _bark(rule_runner)
    chosen = rule_runner.request(
        BackendVariants,
        [BackendVariantsRequest((Address("backends/bark", target_name="src"), Address("backends/bark", target_name="rocm")))],
    )
    assert [str(v.address) for v in chosen] == ["backends/bark:rocm"]


def test_requirement_files_and_lockfile_are_inputs_of_the_variant() -> None:
    rule_runner = _runner()
    _bark(rule_runner)
    closure = rule_runner.request(
        TransitiveTargets, [TransitiveTargetsRequest([Address("backends/bark", target_name="cpu")])]
    )
    specs = {t.address.spec for t in closure.dependencies}
    assert "backends/bark/requirements.txt:requirements-cpu" in specs
    assert "backends/bark/requirements-cpu.txt:requirements-cpu" in specs
    assert "lockfiles/bark-cpu.lock:_bark-cpu_lockfile" in specs
    assert "backends/bark:requirements-cpu#torch" in specs
    # rocm has no lockfile yet: no lockfile target to depend on, and the rest still resolves.
    rocm = rule_runner.request(
        TransitiveTargets, [TransitiveTargetsRequest([Address("backends/bark", target_name="rocm")])]
    )
    specs = {t.address.spec for t in rocm.dependencies}
    assert "backends/bark/requirements-rocm.txt:requirements-rocm" in specs
    assert not any("lockfile" in s for s in specs)


def test_packaging_reads_requirements_through_the_variants_requirements_target() -> None:
    rule_runner = _runner()
    _bark(rule_runner)
    address = Address("backends/bark", target_name="cpu")
    variant = rule_runner.request(Variant, [VariantRequest(address, "cpu")])
    layered = rule_runner.request(LayeredRequirements, [RequirementsOfVariant(address, variant)])
    assert layered.files == ("backends/bark/requirements.txt", "backends/bark/requirements-cpu.txt")
    assert layered.requirements == ("grpcio-tools==1.85.1", "torch")
    # A variant declared by hand without its requirements target gets the fix.
    rule_runner.write_files(
        {"backends/bark/BUILD": 'localai_sources(name="src")\nlocalai_backend_variant(name="cpu", accelerator="cpu", dependencies=[":src"])\n'}
    )
    with pytest.raises(ExecutionError, match=r'depends on 0 localai_requirements targets .* dependencies=\[":requirements-cpu"'):
        rule_runner.request(LayeredRequirements, [RequirementsOfVariant(address, variant)])


OWN_INDEX = "https://wheels.example.org/cu130"


def test_a_variant_with_extra_indexes_needs_its_own_pip_options_in_pants_toml() -> None:
    rule_runner = _runner()
    build = f'localai_backend(accelerators=["cpu", "cuda13"])\nlocalai_backend_variant(name="own", accelerator="cuda13", extra_indexes=["{OWN_INDEX}"])\n'
    _bark(rule_runner, accels=("cpu", "cuda13"), build=build)
    own = Address("backends/bark", target_name="own")
    # The variant's resolve is bark-cuda13 (its accelerator), so pants.toml must name its own file for it.
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(BackendVariant, [BackendVariantRequest(own)])
    msg = str(e.value)
    assert "gives '3rdparty/accelerators/cuda13.txt', not its own pip options (the accelerator's plus " + OWN_INDEX in msg
    assert '"bark-cuda13" = "3rdparty/accelerators/variants/bark-cuda13.txt"' in msg and "./pants localai-resolves" in msg
    rule_runner.set_options(resolve_options("bark", ("cpu", "cuda13"), matrix_pip={"cuda13": "3rdparty/accelerators/variants/bark-cuda13.txt"}))
    v = rule_runner.request(BackendVariant, [BackendVariantRequest(own)]).variant
    assert (v.extra_indexes, v.pip_options) == ((OWN_INDEX,), "3rdparty/accelerators/variants/bark-cuda13.txt")


def test_packaging_refuses_extra_indexes_the_requirement_files_do_not_name() -> None:
    from localai.package.inputs import ExtraIndexMismatchError, check_extra_indexes
    from localai.package.records import backend_record_json

    variant = Variant.of(Address("backends/localai/llm", target_name="cuda13"), MATRIX.accelerators["cuda13"], extra_indexes=(OWN_INDEX,))
    check_extra_indexes(variant, LayeredRequirements((), (), extra_indexes=(OWN_INDEX,)))
    with pytest.raises(ExtraIndexMismatchError) as e:
        check_extra_indexes(variant, LayeredRequirements((), ()))
    assert "Fix: run `./pants localai-import backends/localai`" in str(e.value)
    from localai.model.artifact import FileTree
    from localai.model.lockfile import Lockfile

    record = json.loads(backend_record_json(variant, "0.1.0", Lockfile("lockfiles/x.lock", "ab", b""), FileTree("cd", 1, ()), "ef"))
    assert (record["extra_indexes"], record["pip_options"]) == ([OWN_INDEX], "3rdparty/accelerators/variants/localai-llm-cuda13.txt")
    assert "exempt" not in record
    exempt = {"nvidia-ml-py": "pure Python"}
    record = json.loads(
        backend_record_json(variant, "0.1.0", Lockfile("lockfiles/x.lock", "ab", b""), FileTree("cd", 1, ()), "ef", exempt=exempt)
    )
    assert record["exempt"] == exempt


def test_packaging_fails_an_artifact_that_cannot_load_and_warns_of_what_a_host_may_lack() -> None:
    from localai.package.audit import ArtifactAudit
    from localai.package.backend import ArtifactAuditError, check_audit

    address, build = Address("backends/localai/rfdetr", target_name="cpu"), "backends/localai/rfdetr/BUILD"
    size = "backends/localai-rfdetr/cpu/backend.pex: 766.8 MB of a 600 MB budget (128%)"
    gpu = "wheel torchvision-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl: torchvision/_C.so NEEDs libcudart.so.13, ..."
    host = "wheel numba-0.68.1-....whl: numba/np/ufunc/tbbpool.cpython-311-x86_64-linux-gnu.so NEEDs libtbb.so.12, ..."
    with pytest.raises(ArtifactAuditError) as e:
        check_audit(address, ArtifactAudit((), size, True, gpu_links=(gpu,), host_libs=(host,)), build)
    assert str(e.value) == (
        "backends/localai/rfdetr:cpu: the built artifact fails the audit (`pants lint`), and nothing was written:\n  " + gpu
    )
    assert check_audit(address, ArtifactAudit((), size, True, host_libs=(host,)), build) == (
        f"backends/localai/rfdetr:cpu: the built artifact fails the audit (`pants lint`):\n  {host}\n  {size}: over budget; "
        "shrink the requirements, or raise size_budget_mb in backends/localai/rfdetr/BUILD"
    )
    assert check_audit(address, ArtifactAudit((), size.replace("766.8", "466.8"), False), build) is None
