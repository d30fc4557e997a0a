"""The localai Pants plugin: LocalAI backends as build targets, one variant per accelerator.

Rooms: model/ (what a variant is), package/ (the backend PEX, folder and records), oci/ (the
image and its push), upstream/ (LocalAI's own folders), goals/ (generated outputs), lint/
(audit and staleness checks), native/ (C++ engines, registered as `localai.native`).
"""
from pants.build_graph.build_file_aliases import BuildFileAliases

from localai import target_types as localai_target_types
from localai.errors import LocalAIError
from localai.goals import bundle, ci_matrix, claims, export, gallery, lock, platform_lockfiles, prelock, prelock_inputs, resolves, status, verify
from localai.lint import audit, zizmor
from localai.model import accelerators, lockfile, requirements, variant, wheelhouse
from localai.oci import image, index, publish
from localai.package import backend, cross_downloads, pex_assembly, portable_python, proto, signing, source_checkout, sources
from localai.upstream import git_pins, importer, layout, proto_diff, report


def build_file_aliases():
    # The prelude (macros.py) cannot import: it raises the plugin's one error type by this name.
    return BuildFileAliases(objects={"LocalAIError": LocalAIError})


def target_types():
    return (*localai_target_types.target_types(), index.LocalAIImageIndexTarget, status.StatusDocTarget, *resolves.target_types(), *export.target_types())


def rules():
    return (
        *accelerators.rules(),
        *lockfile.rules(),
        *wheelhouse.rules(),
        *variant.rules(),
        *requirements.rules(),
        *proto.rules(),
        *backend.rules(),
        *cross_downloads.rules(),
        *pex_assembly.rules(),
        *image.rules(),
        *index.rules(),
        *publish.rules(),
        *audit.rules(),
        *zizmor.rules(),
        *claims.rules(),
        *status.rules(),
        *gallery.rules(),
        *bundle.rules(),
        *ci_matrix.rules(),
        *export.rules(),
        *proto_diff.rules(),
        *layout.rules(),
        *git_pins.rules(),
        *sources.rules(),
        *importer.rules(),
        *report.rules(),
        *resolves.rules(),
        *prelock_inputs.rules(),
        *prelock.rules(),
        *platform_lockfiles.rules(),
        *lock.rules(),
        *portable_python.rules(),
        *source_checkout.rules(),
        *signing.rules(),
        *verify.rules(),
    )
