"""An in-toto Statement v1 with a SLSA Provenance v1 predicate for a backend artifact.

Subject: the files of the backend folder (backend.pex, run.sh, build record, SBOM) by sha256.
resolvedDependencies: the lockfile, the Pants digest of the sources the PEX was built from, the
pex tool and, when the folder carries one (python/), the portable Python archive; the
interpreter constraint is an internal parameter; and the source repository and commit
(source_checkout.py: git read by Pants outside every sandbox, the repository URI from
[localai-source].repository), or a statement that there was no checkout. No timestamps: the
statement is as reproducible as the artifact it describes (two clones of one commit give the
same one).
"""
from __future__ import annotations

from localai.model.records import canonical_json

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://github.com/localai-build/pants-plugins/localai/package@v1"


def provenance_statement(
    *,
    target: str,
    subjects: dict[str, str],
    lockfile: str,
    lockfile_sha256: str,
    sources_digest: str,
    pex_version: str,
    pex_sha256: str,
    python: str,
    pants_version: str,
    source: dict | None = None,
    extra_materials: tuple[dict, ...] = (),
) -> bytes:
    """subjects: file name -> sha256."""
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": n, "digest": {"sha256": h}} for n, h in sorted(subjects.items())],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {"target": target, "command": f"./pants package {target}",
                                       **({"source": source} if source else {})},
                "internalParameters": {"python": python},
                "resolvedDependencies": [
                    *([source] if source else []),  # SourceCheckout.material(): repository + gitCommit
                    {"uri": lockfile, "digest": {"sha256": lockfile_sha256}},
                    {"uri": f"pants-digest:sources/{target}", "digest": {"sha256": sources_digest}},
                    {"uri": f"pkg:pypi/pex@{pex_version.lstrip('v')}", "digest": {"sha256": pex_sha256}},
                    *extra_materials,  # e.g. the portable Python archive (portable_python.py)
                ],
            },
            "runDetails": {
                "builder": {"id": f"https://www.pantsbuild.org/pants@{pants_version}",
                            "version": {"pants": pants_version, "pex": pex_version.lstrip("v")}},
                "metadata": {},
            },
        },
    }
    return canonical_json(statement)
