"""`pants lint`: the accelerator audit of every backend variant.

Fails, naming the package and the target, when a lockfile or a built artifact holds a package
its accelerator forbids (3rdparty/accelerators.toml `forbidden`: nvidia-*, cuda-*, CUDA triton
for every non-CUDA accelerator), and prints each built artifact's size against its budget.
Lockfiles are audited for every variant; artifacts are built and audited for the accelerators
in [localai-audit].package_accelerators (CUDA artifacts are several GB: audited statically).
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import PythonExecutable
from pants.core.goals.lint import LintResult, LintTargetsRequest
from pants.core.goals.package import BuiltPackage
from pants.core.util_rules.partitions import PartitionerType
from pants.engine.fs import Digest, DigestContents, DigestEntries, FileEntry, PathGlobs
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, collect_rules, rule
from pants.option.option_types import BoolOption, StrListOption
from pants.option.subsystem import Subsystem
from pants.util.logging import LogLevel
from pants.util.strutil import softwrap

from localai.lockfile import lockfile_json
from localai.package import BackendVariantFieldSet
from localai.variant import Variant, VariantRequest


class AuditSubsystem(Subsystem):
    options_scope = "localai-audit"
    name = "localai-audit"
    help = "The accelerator audit of backend lockfiles and artifacts (runs in `pants lint`)."

    skip = BoolOption(default=False, help="Do not run the audit in `pants lint`.")
    package_accelerators = StrListOption(
        default=["cpu"],
        help=softwrap(
            """
            Accelerators whose variants `pants lint` builds to audit the artifact (contents and
            size budget). Others are audited on their lockfile only.
            """
        ),
    )


class AuditRequest(LintTargetsRequest):
    field_set_type = BackendVariantFieldSet
    tool_subsystem = AuditSubsystem
    partitioner_type = PartitionerType.DEFAULT_ONE_PARTITION_PER_INPUT


def locked_projects(lockfile_content: bytes) -> tuple[str, ...]:
    """Project names in a Pants/pex lockfile (its header lines start with //)."""
    data = lockfile_json(lockfile_content)
    return tuple(
        sorted({req["project_name"] for resolve in data["locked_resolves"] for req in resolve["locked_requirements"]})
    )


# Prints the distributions inside a PEX (its PEX-INFO), one per line.
_PEX_DISTS = (
    "import json,sys,zipfile\n"
    "info = json.loads(zipfile.ZipFile(sys.argv[1]).read('PEX-INFO'))\n"
    "print('\\n'.join(sorted(info['distributions'])))\n"
)


def project_of_wheel(filename: str) -> str:
    return filename.split("-", 1)[0].replace("_", "-").lower()


@dataclass(frozen=True)
class ArtifactAudit:
    forbidden: tuple[str, ...]
    size_line: str
    over_budget: bool


@rule(desc="Audit a backend artifact", level=LogLevel.DEBUG)
async def audit_artifact(field_set: BackendVariantFieldSet) -> ArtifactAudit:
    variant = await Get(Variant, VariantRequest(field_set.address, field_set.accelerator.value))
    built = await Get(BuiltPackage, BackendVariantFieldSet, field_set)
    entries = await Get(DigestEntries, Digest, built.digest)
    pex = next(e for e in entries if isinstance(e, FileEntry) and e.path.endswith(".pex"))
    python = await Get(PythonExecutable, InterpreterConstraints, InterpreterConstraints([variant.accelerator.python]))
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(python.path, "-c", _PEX_DISTS, pex.path),
            input_digest=built.digest,
            description=f"List the distributions in {pex.path}",
        ),
    )
    if result.exit_code != 0:
        raise ValueError(f"{field_set.address}: cannot read PEX-INFO of {pex.path}: {result.stderr.decode()}")
    dists = result.stdout.decode().split()
    budget = field_set.size_budget_mb.value or variant.accelerator.size_budget_mb
    size_mb = pex.file_digest.serialized_bytes_length / 1e6
    return ArtifactAudit(
        forbidden=variant.accelerator.forbidden_in(project_of_wheel(d) for d in dists),
        size_line=f"{pex.path}: {size_mb:.1f} MB of a {budget} MB budget ({100 * size_mb / budget:.0f}%)",
        over_budget=size_mb > budget,
    )


@rule(desc="Audit backend variants", level=LogLevel.DEBUG)
async def audit_variant(request: AuditRequest.Batch, audit: AuditSubsystem) -> LintResult:
    (field_set,) = request.elements
    variant = await Get(Variant, VariantRequest(field_set.address, field_set.accelerator.value))
    contents = await Get(DigestContents, PathGlobs([variant.lockfile]))
    lines, failed = [], False
    if not contents:
        lines.append(f"{field_set.address}: no lockfile ({variant.lockfile}); nothing to audit")
    else:
        bad = variant.accelerator.forbidden_in(locked_projects(contents[0].content))
        for name in bad:
            lines.append(
                f"{field_set.address}: {variant.lockfile} locks '{name}', which the "
                f"{variant.accelerator.name} accelerator forbids ({', '.join(variant.accelerator.forbidden)})"
            )
        failed |= bool(bad)
        if not bad:
            lines.append(f"{field_set.address}: {variant.lockfile}: no forbidden package")
        if variant.accelerator.name in audit.package_accelerators and not bad:
            art = await Get(ArtifactAudit, BackendVariantFieldSet, field_set)
            for name in art.forbidden:
                lines.append(
                    f"{field_set.address}: the built artifact holds '{name}', which the "
                    f"{variant.accelerator.name} accelerator forbids"
                )
            lines.append(f"{field_set.address}: {art.size_line}" + (" OVER BUDGET" if art.over_budget else ""))
            failed |= bool(art.forbidden) or art.over_budget
    return LintResult(
        exit_code=1 if failed else 0,
        stdout="\n".join(lines) + "\n",
        stderr="",
        linter_name=AuditRequest.tool_name,
        partition_description=str(field_set.address),
    )


def rules():
    return (*collect_rules(), *AuditRequest.rules())
