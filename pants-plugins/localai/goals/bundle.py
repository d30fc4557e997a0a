"""`pants localai-bundle <targets>`: an offline gallery, for air-gapped machines.

Writes dist/bundle/: index.yaml (the gallery of gallery.py, same meta entries and
capabilities) whose concrete entries have `uri: ocifile://<location>/images/<entry>.oci.tar`,
and those tarballs, written here from the OCI layouts `pants package` built (LocalAI side-loads
them with no registry; the same bytes as `pants package --localai-oci-tarball`'s image.oci.tar).
Copy the folder to the target machine at `--location` and point LocalAI's backend galleries at
`<location>/index.yaml`.
"""
from __future__ import annotations

import shutil
from typing import Any

from pants.base.build_root import BuildRoot
from pants.core.util_rules.distdir import DistDir
from pants.engine.console import Console
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, collect_rules, goal_rule
from pants.engine.target import Targets
from pants.option.option_types import StrOption
from pants.util.strutil import help_text

from localai.errors import LocalAIError
from localai.goals.gallery import (
    GalleryTarget,
    GalleryTargets,
    GalleryTargetsRequest,
    build_index,
    require_targets,
)
from localai.model.variant import entry_name
from localai.oci.scripts.layout import read_layout, write_tarball

BUNDLE_DIR = "bundle"  # under dist/


class BundleSubsystem(GoalSubsystem):
    name = "localai-bundle"
    help = help_text(
        """
        Write dist/bundle/: the OCI image tarballs of the backend variants given and an
        index.yaml whose entries install them with `ocifile://` (no registry, no network).
        """
    )

    location = StrOption(
        default="",
        help=help_text(
            """
            Absolute path the bundle will have on the machine that installs from it (the
            `ocifile://` URIs point there). Default: where it is written, dist/bundle/ of this
            checkout.
            """
        ),
    )


class BundleGoal(Goal):
    subsystem_cls = BundleSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


class BundleError(LocalAIError):
    pass


def tarball_name(t: GalleryTarget) -> str:
    return f"images/{entry_name(t.backend, t.accelerator)}.oci.tar"


@goal_rule
async def localai_bundle(
    console: Console, targets: Targets, subsystem: BundleSubsystem, distdir: DistDir, build_root: BuildRoot
) -> BundleGoal:
    gallery = await Get(GalleryTargets, GalleryTargetsRequest(tuple(t.address for t in targets)))
    for line in gallery.left_out:
        console.print_stderr(f"left out {line}")
    require_targets(gallery, BundleSubsystem.name)
    root = build_root.pathlib_path
    out = root / distdir.relpath / BUNDLE_DIR
    location = subsystem.location.rstrip("/") or str(out)
    if not location.startswith("/"):
        raise BundleError(f"--localai-bundle-location={location!r} must be an absolute path (ocifile:// needs one)")

    def uri_of(t: GalleryTarget, image: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
        return f"ocifile://{location}/{tarball_name(t)}", ()

    content, built = build_index(gallery, root, distdir.relpath, uri_of)
    if out.exists():
        shutil.rmtree(out)
    (out / "images").mkdir(parents=True)
    for t, image in built:
        layout = root / image["layout"]
        try:
            _, manifest_digest = read_layout(layout)
        except (OSError, ValueError, KeyError, IndexError) as e:
            raise BundleError(
                f"{t.address}: {image['layout']} is not the OCI layout `pants package` wrote ({e}). Fix: run `./pants package {t.address}`."
            ) from e
        if manifest_digest != image["digest"]:
            raise BundleError(
                f"{t.address}: {image['layout']} holds manifest {manifest_digest}, its image.json names {image['digest']}. "
                f"Fix: run `./pants package {t.address}`."
            )
        write_tarball(layout, out / tarball_name(t))
    (out / "index.yaml").write_text(content)
    console.print_stdout(f"Wrote {distdir.relpath}/{BUNDLE_DIR}/: index.yaml and {len(built)} image(s); ocifile:// at {location}")
    return BundleGoal(exit_code=0)


def rules():
    return collect_rules()
