"""A cross-built variant's locked artifacts, downloaded into pex's cache by the variant's CPython.

pex 2.1.137 downloads a lock's artifacts with the interpreter that runs pex, and Pants runs it
with its own CPython 3.9: pip then refuses every wheel whose Requires-Python excludes 3.9
("Package 'grpcio' requires a different Python: 3.9.18 not in '>=3.10'") although the complete
platform is CPython 3.11 (pex/resolve/downloads.py, `ArtifactDownloader._download`, patches pip
for universal locks only; pex-tool/pex#2395, fixed in pex 2.3.1). A build of the PEX from the same
lock run by the variant's own CPython (PEX_PYTHON) downloads them, into the `pex_root` named cache
that Pants' own build of the PEX then reads ("Using cached artifact"). Run once per Pants restart,
never from the process cache alone: a cached result says nothing about what the named cache holds.
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.goals.lockfile import _setup_pip_args_and_constraints_file
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import CompletePlatforms
from pants.backend.python.util_rules.pex_cli import PexCliProcess
from pants.backend.python.util_rules.pex_environment import PythonExecutable
from pants.backend.python.util_rules.pex_requirements import LoadedLockfile, LoadedLockfileRequest, Lockfile, Resolve
from pants.engine.fs import Digest, MergeDigests
from pants.engine.process import ProcessCacheScope, ProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.model.variant import Variant


async def variant_python_env(variant: Variant) -> dict[str, str]:
    """The environment that makes pex re-exec under the variant's CPython, for what pex does with
    the interpreter running it: downloads (above) and building sdists' metadata when locking."""
    python = await Get(PythonExecutable, InterpreterConstraints([variant.accelerator.python]))
    return {"PEX_PYTHON": python.path}


@dataclass(frozen=True)
class CrossDownloadsRequest:
    variant: Variant
    requirements: tuple[str, ...]
    complete_platforms: CompletePlatforms


@dataclass(frozen=True)
class CrossDownloads:
    """Proof that pex's download cache holds the variant's locked artifacts."""


@rule(desc="Download a cross-built variant's locked artifacts", level=LogLevel.DEBUG)
async def download_cross_artifacts(request: CrossDownloadsRequest) -> CrossDownloads:
    variant = request.variant
    # As Pants' own build reads it: without the header, which is not JSON.
    lockfile = await Get(LoadedLockfile, LoadedLockfileRequest(await Get(Lockfile, Resolve(variant.resolve, False))))
    pip = await _setup_pip_args_and_constraints_file(variant.resolve)
    await Get(
        ProcessResult,
        PexCliProcess(
            subcommand=(),
            extra_args=(
                "--lock",
                lockfile.lockfile_path,
                *request.complete_platforms.generate_pex_arg_list(),
                *pip.args,
                "--layout=packed",
                "--output-file=downloads.pex",
                *request.requirements,
            ),
            additional_input_digest=await Get(Digest, MergeDigests([lockfile.lockfile_digest, pip.digest, request.complete_platforms.digest])),
            extra_env=await variant_python_env(variant),
            description=f"Download {variant.lockfile}'s artifacts for {variant.platform.name} with its CPython ({variant.accelerator.python})",
            level=LogLevel.DEBUG,
            cache_scope=ProcessCacheScope.PER_RESTART_SUCCESSFUL,
        ),
    )
    return CrossDownloads()


def rules():
    return collect_rules()
