from __future__ import annotations

import pytest
from pants.backend.python.target_types import PythonRequirementResolveField, PythonRequirementsField
from pants.engine.addresses import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule

from localai.model.requirements import LayeredRequirements, LayeredRequirementsRequest, layer
from localai.testutil import backend_files, make_rule_runner, resolve_options


def test_overlay_pin_replaces_the_base_pin_of_the_same_project() -> None:
    # LocalAI installs requirements.txt, then requirements-<accel>.txt: the overlay wins (the
    # bark bug of LocalAI PR #5990 came from a later file pulling another torch).
    reqs = layer(
        [
            ("requirements.txt", "torch\ntransformers==5.0\n# comment\nGrpcio_Tools==1.0\n"),
            ("requirements-cpu.txt", "torch==2.13.0+cpu\n"),
        ]
    )
    # One entry per project (names compared normalised), each kept as written.
    assert reqs == ("Grpcio_Tools==1.0", "torch==2.13.0+cpu", "transformers==5.0")


def test_unparseable_line_names_the_file_and_line() -> None:
    with pytest.raises(ValueError, match="requirements-cpu.txt at line 2"):
        layer([("requirements-cpu.txt", "torch\nthis is not a requirement\n")])


def test_generator_makes_one_requirement_per_project_in_the_variant_resolve() -> None:
    rule_runner = make_rule_runner()
    rule_runner.write_files(backend_files("demo", {"cpu": "torch==2.13.0+cpu\n", "cuda13": "torch==2.13.0\n"}))
    rule_runner.set_options(resolve_options("demo", ["cpu", "cuda13"]))
    cpu_torch = rule_runner.get_target(Address("backends/demo", target_name="requirements-cpu", generated_name="torch"))
    cuda_torch = rule_runner.get_target(Address("backends/demo", target_name="requirements-cuda13", generated_name="torch"))
    assert str(cpu_torch[PythonRequirementsField].value[0]) == "torch==2.13.0+cpu"
    assert cpu_torch[PythonRequirementResolveField].value == "demo-cpu"
    assert str(cuda_torch[PythonRequirementsField].value[0]) == "torch==2.13.0"
    assert cuda_torch[PythonRequirementResolveField].value == "demo-cuda13"


def test_missing_overlay_names_the_file_and_both_fixes() -> None:
    rule_runner = make_rule_runner(QueryRule(LayeredRequirements, [LayeredRequirementsRequest]))
    rule_runner.write_files(backend_files("demo", {"cpu": None}))
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(LayeredRequirements, [LayeredRequirementsRequest("backends/demo", "cpu", "backends/demo:cpu")])
    msg = str(e.value)
    assert "backends/demo:cpu: missing backends/demo/requirements-cpu.txt" in msg
    assert "remove 'cpu' from accelerators=[...] in backends/demo/BUILD" in msg
