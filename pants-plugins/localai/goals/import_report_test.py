from __future__ import annotations

from localai.goals.import_report import Resolution, ours_by_platform, ours_line, report_line, totals_line
from localai.model.localai_layout import Profile
from localai.model.lockfile import Lockfile
from localai.testutil import fake_lockfile

CPU = Profile("cpu", "", "cpu")
VULKAN = Profile("vulkan", "vulkan", None)


def test_a_cuda_pulling_cpu_resolution_is_counted_in_packages_and_mb() -> None:
    resolution = Resolution(
        (
            ("torch", "2.7.1", 821_000_000),
            ("nvidia-cudnn-cu12", "9.5.1.17", 571_000_000),
            ("triton", "3.3.1", 155_000_000),
            ("grpcio", "1.85.3", 6_000_000),
        )
    )
    lock = fake_lockfile({"torch": ("2.13.0+cpu", []), "grpcio": ("1.85.3", [])}).encode()
    ours = ours_line("lockfiles/localai-demo-cpu.lock", Lockfile.of("lockfiles/localai-demo-cpu.lock", lock), CPU)
    line = report_line("backends/localai/demo", CPU, resolution, ours)
    assert line == (
        "backends/localai/demo [cpu]: LocalAI's files pull 2 nvidia/cuda/triton packages, 726 MB "
        "(4 packages, 1,553 MB in all)  | ours: lockfiles/localai-demo-cpu.lock: 0 nvidia/cuda/triton packages"
    )


def test_unknown_sizes_and_missing_lockfiles_are_said() -> None:
    resolution = Resolution((("nvidia-nccl-cu12", "2.26", None), ("numpy", "2.0", 20_000_000)))
    line = report_line("d", CPU, resolution, ours_line("lockfiles/x.lock", None, CPU))
    assert "pull 1 nvidia/cuda/triton packages, 0 MB (+1 of unknown size)" in line
    assert line.endswith("| ours: lockfiles/x.lock not generated")
    assert ours_line("lockfiles/x.lock", None, VULKAN) == "no accelerator here"


def test_a_clean_resolution_and_a_failed_one() -> None:
    assert "pull no nvidia/cuda/triton package" in report_line("d", CPU, Resolution((("numpy", "2.0", 1),)), "-")
    failed = report_line("d", CPU, Resolution((), "ERROR: No matching distribution found for torch==0.0.1\n"), "-")
    assert "LocalAI's resolution failed: ERROR: No matching distribution found for torch==0.0.1" in failed
    noticed = Resolution((), "ERROR: No matching distribution found for x\n\n[notice] A new release of pip is available\n"
                             "[notice] To update, run: python -m pip install --upgrade pip\n")
    assert "failed: ERROR: No matching distribution found for x  |" in report_line("d", CPU, noticed, "-")


def test_totals_count_only_the_resolutions_that_succeeded() -> None:
    cuda = Resolution((("torch", "2.7.1", 800_000_000), ("nvidia-cublas-cu12", "12.6", 400_000_000)))
    clean = Resolution((("numpy", "2.0", 20_000_000),))
    failed = Resolution((), "ERROR: no network")
    assert totals_line([cuda, clean, failed]) == (
        "total: 2 of 3 resolved; LocalAI's files pull 1 nvidia/cuda/triton packages (400 MB) in 1 of them; "
        "3 packages, 1,220 MB in all"
    )


def test_the_arm64_lock_is_reported_beside_the_x86_64_one() -> None:
    x86 = fake_lockfile({"torch": ("2.13.0+cpu", [])}).encode()
    arm64 = fake_lockfile({"torch": ("2.9.1", []), "triton": ("3.5.1", [])}).encode()
    ours = ours_by_platform([
        ("x86_64", ours_line("lockfiles/localai-demo-cpu.lock", Lockfile.of("lockfiles/localai-demo-cpu.lock", x86), CPU)),
        ("aarch64", ours_line("lockfiles/localai-demo-cpu-arm64.lock", Lockfile.of("lockfiles/localai-demo-cpu-arm64.lock", arm64), CPU)),
    ])
    assert report_line("d", CPU, Resolution((("torch", "2.7.1", 1),)), ours).endswith(
        "| ours: x86_64: lockfiles/localai-demo-cpu.lock: 0 nvidia/cuda/triton packages; "
        "aarch64: lockfiles/localai-demo-cpu-arm64.lock: 1 nvidia/cuda/triton packages (triton, ...)"
    )
    # A profile with one platform (no arm64 variant) reads as before.
    assert ours_by_platform([("x86_64", "lockfiles/x.lock not generated")]) == "lockfiles/x.lock not generated"
