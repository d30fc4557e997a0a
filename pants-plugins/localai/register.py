"""The localai Pants plugin: LocalAI backends as build targets, one variant per accelerator.

Rooms (README.md): model/ (what a variant is, LocalAI's folder layout), native/ (C++ engines),
oci/ (the image and its push), package/ (the backend PEX, folder, records and audit), lint/
(lint checks), goals/ (every goal).
"""
from pants.build_graph.build_file_aliases import BuildFileAliases

from localai import target_types as localai_target_types
from localai.errors import LocalAIError
from localai.goals import (
    bundle,
    ci_matrix,
    claims,
    export,
    gallery,
    import_report,
    level_claims,
    localai_import,
    lock,
    pex_lock,
    prelock,
    prelock_inputs,
    proto_diff,
    resolves,
    status,
    verify,
)
from localai.lint import audit, generated, zizmor
from localai.model import accelerators, git_pins, localai_layout, lockfile, requirements, variant, wheelhouse
from localai.native import cpu_levels, model_conversion
from localai.native import rules as native_rules
from localai.native import target_types as native_target_types
from localai.oci import image, index, publish
from localai.package import audit as package_audit
from localai.package import backend, inputs, install, pex_assembly, portable_python, proto, signing, source_checkout, sources


def build_file_aliases():
    # For BUILD files and the prelude (macros.py), which cannot import: the CPU level names (the
    # localai_engine macro's default) and the plugin's one error type, which the macros raise.
    return BuildFileAliases(objects={"LOCALAI_CPU_LEVELS": cpu_levels.CPU_LEVELS, "LocalAIError": LocalAIError})


def target_types():
    return (
        *localai_target_types.target_types(),
        *native_target_types.target_types(),
        *model_conversion.target_types(),
        index.LocalAIImageIndexTarget,
        status.StatusDocTarget,
        *resolves.target_types(),
        *export.target_types(),
    )


def rules():
    return (
        *native_rules.rules(),
        *cpu_levels.rules(),
        *model_conversion.rules(),
        *accelerators.rules(),
        *lockfile.rules(),
        *wheelhouse.rules(),
        *variant.rules(),
        *requirements.rules(),
        *proto.rules(),
        *backend.rules(),
        *inputs.rules(),
        *pex_assembly.rules(),
        *install.rules(),
        *image.rules(),
        *index.rules(),
        *publish.rules(),
        *package_audit.rules(),
        *audit.rules(),
        *zizmor.rules(),
        *generated.rules(),
        *claims.rules(),
        *level_claims.rules(),
        *status.rules(),
        *gallery.rules(),
        *bundle.rules(),
        *ci_matrix.rules(),
        *export.rules(),
        *proto_diff.rules(),
        *localai_layout.rules(),
        *git_pins.rules(),
        *sources.rules(),
        *localai_import.rules(),
        *import_report.rules(),
        *resolves.rules(),
        *prelock_inputs.rules(),
        *prelock.rules(),
        *pex_lock.rules(),
        *lock.rules(),
        *portable_python.rules(),
        *source_checkout.rules(),
        *signing.rules(),
        *verify.rules(),
    )
