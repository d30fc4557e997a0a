"""`pants lint`: the accelerator audit of every backend variant.

Fails, naming the package and the target, when a lockfile or a built artifact holds a package
its accelerator forbids (3rdparty/accelerators.toml `forbidden`: nvidia-*, cuda-*, CUDA triton
for every non-CUDA accelerator), and prints each built artifact's size against its budget.
Lockfiles are audited for every variant; artifacts are built and audited (package/audit.py) for
the accelerators in [localai-audit].package_accelerators (CUDA artifacts are several GB: audited
statically). A lockfile that cannot install what it was locked for (a locked version breaking
another locked package's requirement) fails too.
"""
from __future__ import annotations

from urllib.parse import unquote

from pants.core.goals.lint import LintResult, LintTargetsRequest
from pants.core.util_rules.partitions import PartitionerType
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.model.artifact import BackendVariantFieldSet
from localai.model.lockfile import Lockfile
from localai.model.variant import BackendVariant, BackendVariantRequest
from localai.package.audit import ArtifactAudit
from localai.package.options import AuditSubsystem


class AuditRequest(LintTargetsRequest):
    field_set_type = BackendVariantFieldSet
    tool_subsystem = AuditSubsystem
    partitioner_type = PartitionerType.DEFAULT_ONE_PARTITION_PER_INPUT


def wrong_platform_wheels(lockfile: Lockfile, machine: str) -> tuple[str, ...]:
    """One line per locked wheel built for another machine than ``machine`` (a platform lockfile
    regenerated for the build machine's platform, by `generate-lockfiles`, fails here)."""
    lines = []
    for req in lockfile.requirements():
        for artifact in req.artifacts:
            name = unquote(artifact.url.rsplit("/", 1)[-1])
            if not name.endswith(".whl"):
                continue
            tags = name[: -len(".whl")].split("-")[-1].split(".")
            if "any" not in tags and not any(t.endswith(machine) for t in tags):
                lines.append(
                    f"{lockfile.path}: locks {name}, a wheel for {'/'.join(tags)}, in a lockfile for {machine}; "
                    f"regenerate it for its platform (`./pants localai-platform-lockfiles`), not with `generate-lockfiles`"
                )
    return tuple(lines)


def artifact_report(target: str, accelerator: str, build_file: str, art: ArtifactAudit) -> tuple[list[str], bool]:
    """The lint lines for an audited artifact, and whether they fail the audit."""
    lines = [
        f"{target}: the built artifact holds '{name}', which the {accelerator} accelerator forbids"
        for name in art.forbidden
    ]
    lines += [
        f"{target}: {line}"
        for line in art.gpu_links + art.wrong_machine + art.host_libs + art.optional_host_libs + art.declared_host_libs
    ]
    if not art.gpu_links:
        lines.append(f"{target}: {art.elf_files} ELF files, none NEEDs a GPU runtime the {accelerator} accelerator does not allow")
    over = f" OVER BUDGET: shrink the requirements, or raise size_budget_mb in {build_file}" if art.over_budget else ""
    lines.append(f"{target}: {art.size_line}{over}")
    return lines, bool(art.forbidden) or art.over_budget or bool(art.gpu_links) or bool(art.wrong_machine) or bool(art.host_libs)


@rule(desc="Audit backend variants", level=LogLevel.DEBUG)
async def audit_variant(request: AuditRequest.Batch, audit: AuditSubsystem) -> LintResult:
    (field_set,) = request.elements
    bv = await Get(BackendVariant, BackendVariantRequest(field_set.address))
    variant = bv.variant
    lines, failed = [], False
    if bv.lockfile is None:
        lines.append(f"{field_set.address}: no lockfile ({variant.lockfile}); nothing to audit")
    else:
        bad = bv.forbidden_locked()
        for name in bad:
            lines.append(
                f"{field_set.address}: {variant.lockfile} locks '{name}', which the "
                f"{variant.accelerator.name} accelerator forbids ({', '.join(variant.accelerator.forbidden)})"
            )
        # Universal lockfiles (the build machine's platform) hold every platform's wheels by design.
        wrong = wrong_platform_wheels(bv.lockfile, variant.platform.machine) if variant.platform.cross else ()
        lines += [f"{field_set.address}: {line}" for line in wrong]
        # A lock its own install refuses (model/lock_consistency.py): named here, not by pex at package time.
        broken = bv.unsatisfied_locked()
        lines += [f"{field_set.address}: {variant.lockfile} cannot install: {line}" for line in broken]
        # A lock made without BUILD `exclude` (by `generate-lockfiles`) holds what the artifact leaves out.
        mismatch = bv.exclusion_mismatch()
        lines += [mismatch] if mismatch else []
        failed |= bool(bad) or bool(wrong) or bool(broken) or bool(mismatch)
        if bv.exclude and not mismatch:
            lines.append(
                f"{field_set.address}: {variant.lockfile} was locked without {', '.join(bv.exclude)} and what only they "
                f"need (BUILD `exclude`, pex's --exclude)"
            )
        for name, why in bv.exempt.items():
            lines.append(
                f"{field_set.address}: {name}, which the {variant.accelerator.name} accelerator forbids, is exempt "
                f"(BUILD `exempt`): {why}"
            )
        if not bad:
            lines.append(f"{field_set.address}: {variant.lockfile}: no forbidden package")
        if variant.accelerator.name in audit.package_accelerators and not bad and not broken:
            art = await Get(ArtifactAudit, BackendVariantFieldSet, field_set)
            art_lines, art_failed = artifact_report(
                str(field_set.address), variant.accelerator.name, f"{field_set.address.spec_path}/BUILD", art
            )
            lines += art_lines
            failed |= art_failed
    return LintResult(
        exit_code=1 if failed else 0,
        stdout="\n".join(lines) + "\n",
        stderr="",
        linter_name=AuditRequest.tool_name,
        partition_description=str(field_set.address),
    )


def rules():
    return (*collect_rules(), *AuditRequest.rules())
