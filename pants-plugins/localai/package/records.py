"""The records of a backend folder: build-record.json, the SBOM and the provenance statement.

Pure functions of what packaging already knows (digests, the lockfile, the interpreter): no file
of the artifact is read again to write them.
"""
from __future__ import annotations

import hashlib
import json
from typing import Mapping

from pants.engine.fs import FileContent

from localai.model.accelerators import python_version_of
from localai.model.artifact import FileTree
from localai.model.folder import BUILD_RECORD, PROVENANCE_NAME, RUN_SH, SBOM_NAME, SITE_PACKAGES, START_PY
from localai.model.lockfile import Lockfile
from localai.model.records import canonical_json
from localai.model.variant import Variant
from localai.package.portable_python import PortablePython
from localai.package.provenance import provenance_statement
from localai.package.sbom import cyclonedx_sbom


def backend_record_json(
    variant: Variant,
    version: str,
    lockfile: Lockfile,
    tree: FileTree,
    pex_sha256: str,
    pin_policy: tuple[str, ...] = (),
    interpreter: dict | None = None,
    exempt: Mapping[str, str] = {},
) -> bytes:
    return canonical_json(
        {
            "name": variant.backend,
            "accelerator": variant.accelerator.name,
            "platform": variant.platform.name,
            "capabilities": list(variant.accelerator.capabilities),
            "version": version,
            "resolve": variant.resolve,
            "lockfile": lockfile.path,
            "lockfile_sha256": lockfile.sha256,
            "artifact": SITE_PACKAGES,
            "artifact_sha256": tree.sha256,  # FileTree: the sha256sum listing of site-packages/
            "artifact_size": tree.size,
            "pex_sha256": pex_sha256,  # the PEX it was installed from (dist/pex/), by the same recipe
            "sbom": SBOM_NAME,
            "provenance": PROVENANCE_NAME,
            # Imported LocalAI folders: pins the accelerator's policy replaced (model/localai_layout.py).
            **({"pin_policy": list(pin_policy)} if pin_policy else {}),
            # The folder's own indexes, seen by this variant's resolve alone (its pip options file).
            **({"extra_indexes": list(variant.extra_indexes), "pip_options": variant.pip_options} if variant.extra_indexes else {}),
            # Forbidden projects its BUILD exempts, each with why ([localai.overrides.<folder>] exempt).
            **({"exempt": dict(exempt)} if exempt else {}),
            # The portable CPython in python/ (portable_python.py); absent: the host's python.
            **({"interpreter": interpreter} if interpreter else {}),
        }
    )


def folder_records(
    *,
    variant: Variant,
    version: str,
    lockfile: Lockfile,
    tree: FileTree,
    pex_tree_sha256: str,
    start_py: bytes,
    pin_policy: tuple[str, ...],
    portable: PortablePython,
    engine_components: tuple[str, ...],
    sources_digest: str,
    pex_version: str,
    pex_sha256: str,
    pants_version: str,
    original_urls: Mapping[str, str] = {},
    source: dict | None = None,
    exempt: Mapping[str, str] = {},
) -> tuple[FileContent, ...]:
    """run.sh, the build record, the SBOM and the provenance statement that names all of them."""
    run_sh = portable.run_sh(python_version_of(variant.accelerator.python)).encode()
    record = backend_record_json(
        variant, version, lockfile, tree, pex_tree_sha256, pin_policy, portable.record() if portable.enabled else None, exempt
    )
    sbom = cyclonedx_sbom(
        name=variant.backend,
        version=version,
        artifact=SITE_PACKAGES,
        artifact_sha256=tree.sha256,
        lockfile=lockfile.path,
        lockfile_sha256=lockfile.sha256,
        requirements=lockfile.requirements(),
        deps=tree.deps,
        original_urls=original_urls,
        extra_components=(*(json.loads(c) for c in engine_components), *portable.sbom_components()),
    )
    provenance = provenance_statement(
        target=str(variant.address),
        subjects={
            SITE_PACKAGES: tree.sha256,
            START_PY: hashlib.sha256(start_py).hexdigest(),
            RUN_SH: hashlib.sha256(run_sh).hexdigest(),
            BUILD_RECORD: hashlib.sha256(record).hexdigest(),
            SBOM_NAME: hashlib.sha256(sbom).hexdigest(),
        },
        lockfile=lockfile.path,
        lockfile_sha256=lockfile.sha256,
        sources_digest=sources_digest,
        pex_version=pex_version,
        pex_sha256=pex_sha256,
        python=variant.accelerator.python,
        pants_version=pants_version,
        source=source,
        extra_materials=portable.materials(),
    )
    return (
        FileContent(RUN_SH, run_sh, is_executable=True),
        FileContent(BUILD_RECORD, record),
        FileContent(SBOM_NAME, sbom),
        FileContent(PROVENANCE_NAME, provenance),
    )
