"""The options of `pants package` (one module, as Pants keeps a backend's subsystems): the
artifact audit, the portable CPython, the source repository provenance names, and signing."""
from __future__ import annotations

from pants.backend.python.subsystems.python_tool_base import PythonToolRequirementsBase
from pants.option.option_types import BoolOption, StrListOption, StrOption
from pants.option.subsystem import Subsystem
from pants.util.strutil import help_text, softwrap

PINNED = "//3rdparty/portable-python:cpython-3.11-x86_64-linux-gnu"


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
            size budget), and whose artifacts `pants package` audits as it builds them (an ELF
            file that cannot load where the artifact runs fails it; a host library or the size
            budget is a warning). Others are audited on their lockfile only.
            """
        ),
    )


class PortablePythonSubsystem(Subsystem):
    options_scope = "localai-portable-python"
    help = "The portable CPython (python-build-standalone `install_only`) that backend folders and images carry."

    archive = StrOption(
        default="",
        help=help_text(
            f"""
            Address of a `file` target whose one file is a python-build-standalone `install_only`
            archive (python/bin/python3.X, python/lib/python3.X/...), e.g. the pinned
            `{PINNED}`. Set: every backend folder carries it unpacked as python/ and run.sh
            starts backend.pex with it (LocalAI's PORTABLE_PYTHON). Empty: run.sh uses the
            host's python3.11. To use a mirror or a local copy of the pinned archive, declare
            `file(source=http_source(url=<mirror or file:///path>, len=..., sha256=<the same>))`
            or `file(source="<archive in the repo>")` and name that target here.
            """
        ),
    )


class SourceRepositorySubsystem(Subsystem):
    options_scope = "localai-source"
    help = "The source repository that provenance statements name (with the commit git reports)."

    repository = StrOption(
        "--repository",
        default="",
        help=(
            "The repository's URI as provenance names it, e.g. https://github.com/<owner>/<repo> "
            "(CI: `PANTS_LOCALAI_SOURCE_REPOSITORY=${{ github.server_url }}/${{ github.repository }}`). "
            "Not read from git's remotes, which differ between clones of the same commit."
        ),
    )


class Signing(PythonToolRequirementsBase):
    options_scope = "localai-signing"
    help = help_text(
        """
        Sign each backend folder's provenance statement (provenance.intoto.json) as a DSSE
        envelope (provenance.intoto.dsse.json, beside it and in the OCI image); check one with
        `./pants localai-verify --public-key=<pem> <folder or image>`.
        """
    )

    default_version = "cryptography==50.0.2"
    default_requirements = ["cryptography"]
    # Registered so that to_pex_request can tell they are left default: then the resolve's own apply.
    register_interpreter_constraints = True
    # Never read: pants.toml installs the signer from the `signing` resolve
    # ([localai-signing].install_from_resolve), locked with ./pants generate-lockfiles.
    default_lockfile_resource = ("localai.package", "signing.lock")

    key_file = StrOption(
        default="",
        help=help_text(
            """
            PEM private key (Ed25519 or ECDSA P-256, unencrypted) that signs the provenance, a
            path relative to the build root. Empty (the default): no envelope is written. The file
            must be visible to Pants (not listed in .gitignore or pants_ignore); never commit it:
            CI writes it from a secret into the throw-away checkout.
            """
        ),
    )
