"""The localai Pants plugin: LocalAI backends as build targets, one variant per accelerator."""
from localai import accelerators, audit, claims, lockfile, package, proto, requirements, status, variant
from localai import bundle, ci_matrix, export, gallery, image, proto_diff, publish
from localai import localai_import, localai_layout, localai_package, portable_python, resolves
from localai import target_types as localai_target_types


def target_types():
    return (*localai_target_types.target_types(), status.StatusDocTarget, *resolves.target_types(), *export.target_types())


def rules():
    return (
        *accelerators.rules(),
        *lockfile.rules(),
        *variant.rules(),
        *requirements.rules(),
        *proto.rules(),
        *package.rules(),
        *image.rules(),
        *publish.rules(),
        *audit.rules(),
        *claims.rules(),
        *status.rules(),
        *gallery.rules(),
        *bundle.rules(),
        *ci_matrix.rules(),
        *export.rules(),
        *proto_diff.rules(),
        *localai_layout.rules(),
        *localai_package.rules(),
        *localai_import.rules(),
        *resolves.rules(),
        *portable_python.rules(),
    )
