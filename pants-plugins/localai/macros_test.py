"""localai_backend(...) (the BUILD prelude, macros.py): every argument of the wrong type or value
is a LocalAIError naming the BUILD file, the argument, what was expected and the fix."""
from __future__ import annotations

import pytest
from pants.build_graph.address import Address
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.target import Tags

from localai.target_types import AcceleratorField, ExemptField, LayoutField, NotLockableHereField, PlatformField
from localai.testutil import backend_files, make_rule_runner


@pytest.fixture(scope="module")
def rule_runner():
    runner = make_rule_runner()
    runner.write_files(backend_files("x", {"cpu": ""}))
    return runner


# (arguments after accelerators, text the error must hold); one or more wrong values per argument.
WRONG = [
    ('accelerators="cpu"', 'accelerators=\'cpu\': expected a non-empty list of accelerator names'),
    ("accelerators=[]", "accelerators=[]: expected a non-empty list of accelerator names"),
    ('accelerators=["cpu", 3]', "accelerators=['cpu', 3]: expected a non-empty list"),
    ("size_budget_mb=[600]", "size_budget_mb=[600]: expected a dict {variant: MB}, MB a whole number > 0"),
    ('size_budget_mb={"cpu": "600"}', "size_budget_mb={'cpu': '600'}: expected a dict {variant: MB}"),
    ('size_budget_mb={"cpu": 0}', "size_budget_mb={'cpu': 0}: expected a dict {variant: MB}"),
    ('size_budget_mb={"gpu": 600}', "'gpu' is given a budget or a note but is not a variant"),
    ('not_lockable_here="unreachable"', "not_lockable_here='unreachable': expected a dict {variant: reason}"),
    ('not_lockable_here={"cpu": 1}', "not_lockable_here={'cpu': 1}: expected a dict {variant: reason}"),
    ("version=1", "version=1: expected a non-empty version string"),
    ('engines="engines/minilm:avx2"', "engines='engines/minilm:avx2': expected a list of native engine target addresses"),
    ("libraries=[1]", "libraries=[1]: expected a list of localai_sources target addresses"),
    ('tags="by-hand"', "tags='by-hand': expected a list of tags"),
    ('arm64="cpu"', "arm64='cpu': expected a list of accelerator names"),
    ('arm64=["cuda13"]', "arm64=[...] names 'cuda13', which is not in accelerators=['cpu']"),
    ('arm64=["cpu"], arm64_tags="by-hand"', "arm64_tags='by-hand': expected a list of tags of the arm64 variants"),
    ('arm64_engines="engines/minilm:arm64-neon"', "arm64_engines='engines/minilm:arm64-neon': expected a list"),
    ('arm64_engines=["engines/minilm:arm64-neon"]', "arm64_engines=[...] without arm64=[...]"),
    ('engines=["engines/minilm:avx2"], arm64=["cpu"]', "arm64=[...] with engines=[...] needs arm64_engines=[...]"),
    ('prelock="cpu"', "prelock='cpu': expected a list of accelerator names"),
    ('prelock=["rocm"]', "prelock=[...] names 'rocm', which is not in accelerators=['cpu']"),
    ('exclude={"cpu": "triton"}', "exclude={'cpu': 'triton'}: expected a dict {variant: [project, ...]}"),
    ('exclude={"rocm": ["triton"]}', "'rocm' is given a budget or a note but is not a variant"),
    ('host_libs={"cpu": ["libnuma.so.1"]}', "host_libs={'cpu': ['libnuma.so.1']}: expected a dict {variant: {soname: why}}"),
]


def test_table_covers_every_argument() -> None:
    import ast
    from pathlib import Path

    tree = ast.parse((Path(__file__).parent / "macros.py").read_text())
    backend = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "localai_backend")
    named = {a.arg for a in backend.args.args}
    covered = {case.split("=", 1)[0] for case, _ in WRONG} | {
        part.strip().split("=", 1)[0] for case, _ in WRONG for part in case.split(", ") if "=" in part and part[0].isalpha()
    }
    assert named <= covered | {"accelerators"}, named - covered


@pytest.mark.parametrize("arguments,expected", WRONG)
def test_a_wrong_argument_is_a_localai_error_naming_the_file_and_the_fix(rule_runner, arguments, expected) -> None:
    build = f'localai_backend({arguments})\n' if arguments.startswith("accelerators") else f'localai_backend(accelerators=["cpu"], {arguments})\n'
    rule_runner.write_files({"backends/x/BUILD": build})
    with pytest.raises(ExecutionError) as e:
        rule_runner.get_target(Address("backends/x", target_name="cpu"))
    # Pants wraps a BUILD file's exception as "Failed to parse ./<file>:\n<type>: <message>".
    message = str(e.value)
    assert "Failed to parse ./backends/x/BUILD:\nLocalAIError: backends/x/BUILD: localai_backend(...): " in message, message
    assert expected in message, message
    assert "Write e.g." in message or "Name one of" in message or "Add " in message, message


def test_right_arguments_still_declare_the_variants(rule_runner) -> None:
    rule_runner.write_files(
        {"backends/x/BUILD": 'localai_backend(accelerators=["cpu"], size_budget_mb={"cpu": 800}, '
         'not_lockable_here={"cpu": "why"}, version="1.0", tags=["by-hand"], prelock=["cpu"])\n'}
    )
    target = rule_runner.get_target(Address("backends/x", target_name="cpu"))
    assert target.address.spec == "backends/x:cpu"


def _imported_folder(rule_runner, line: str) -> None:
    """A LocalAI folder as `./pants localai-import` writes it (its requirement files, one BUILD line)."""
    rule_runner.write_files({
        "backends/localai/common/BUILD": "localai_common()\n",
        "backends/localai/common/grpc_auth.py": "",
        "backends/localai/y/backend.py": "",
        "backends/localai/y/requirements.txt": "grpcio==1.85.3\n",
        "backends/localai/y/requirements-cpu.txt": "torch==2.7.1\ntorchaudio\n",
        "backends/localai/y/BUILD": line + "\n",
    })


def test_localai_import_declares_the_arm64_variant_as_localai_backend_does(rule_runner) -> None:
    _imported_folder(
        rule_runner,
        'localai_import(accelerators=["cpu"], arm64=["cpu"], arm64_tags=["by-hand"], '
        'not_lockable_here={"cpu": "x86_64 torchaudio is CUDA"}, exempt={"cpu-arm64": {"nvidia-ml-py": "pure Python"}})',
    )
    arm64 = rule_runner.get_target(Address("backends/localai/y", target_name="cpu-arm64"))
    assert (arm64[AcceleratorField].value, arm64[PlatformField].value, arm64[LayoutField].value) == ("cpu", "linux_aarch64", "localai")
    assert arm64[NotLockableHereField].value is None  # keyed by variant: the note is the x86_64 variant's
    assert tuple(arm64.get(Tags).value) == ("by-hand",)
    assert dict(arm64.get(ExemptField).value) == {"nvidia-ml-py": "pure Python"}
    requirements = rule_runner.get_target(Address("backends/localai/y", target_name="requirements-cpu-arm64"))
    assert (requirements[PlatformField].value, requirements[LayoutField].value) == ("linux_aarch64", "localai")
    cpu = rule_runner.get_target(Address("backends/localai/y", target_name="cpu"))
    assert (cpu[PlatformField].value, cpu[NotLockableHereField].value) == ("linux_x86_64", "x86_64 torchaudio is CUDA")
    assert rule_runner.get_target(Address("backends/localai/y", target_name="cpu-index")).address.spec == "backends/localai/y:cpu-index"


def test_localai_import_without_arm64_declares_no_arm64_variant(rule_runner) -> None:
    _imported_folder(rule_runner, 'localai_import(accelerators=["cpu"])')
    assert rule_runner.get_target(Address("backends/localai/y", target_name="cpu")).address.spec == "backends/localai/y:cpu"
    with pytest.raises(ExecutionError, match="cpu-arm64"):
        rule_runner.get_target(Address("backends/localai/y", target_name="cpu-arm64"))


@pytest.mark.parametrize(
    "arguments, expected",
    [
        ('arm64=["cuda13"]', "arm64=[...] names 'cuda13', which is not in accelerators=['cpu']"),
        ('not_lockable_here={"cuda13-arm64": "why"}', "'cuda13-arm64' is given a budget or a note but is not a variant"),
    ],
)
def test_localai_import_refuses_an_arm64_variant_of_no_declared_accelerator(rule_runner, arguments, expected) -> None:
    _imported_folder(rule_runner, f'localai_import(accelerators=["cpu"], {arguments})')
    with pytest.raises(ExecutionError) as e:
        rule_runner.get_target(Address("backends/localai/y", target_name="cpu"))
    assert "LocalAIError: backends/localai/y/BUILD: localai_import(...): " in str(e.value), str(e.value)
    assert expected in str(e.value)
