"""`pants localai-verify --public-key=<pem> <folder | image>`: is this artifact the one that was signed?

Three checks, each failing with the file, the cause and the fix:
  1. the DSSE envelope (provenance.intoto.dsse.json) is there, its payloadType is in-toto and a
     signature verifies with the public key (package/scripts/dsse_tool.py with the `signing` resolve's
     cryptography, in the sandbox: the plugin's own venv has no cryptography);
  2. the statement beside the envelope, when there is one, is the signed payload byte for byte;
  3. every subject of the signed statement matches the files as they are now: each is hashed
     again (package/subjects.py), the packed PEX by FileTree's recipe.
The artifact is read where it lies (under dist/ or anywhere: `-- /abs/path`), like bundle.py
reads dist/: it is what is being checked, not an input of a build.
"""
from __future__ import annotations

import json
from pathlib import Path

from pants.backend.python.util_rules.pex import Pex, PexProcess, PexRequest
from pants.base.build_root import BuildRoot
from pants.base.specs import Specs
from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, FileContent, MergeDigests
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.process import FallibleProcessResult
from pants.engine.rules import Get, collect_rules, goal_rule
from pants.option.option_types import StrListOption, StrOption
from pants.util.logging import LogLevel
from pants.util.strutil import help_text

from localai.errors import LocalAIError
from localai.model.folder import ENVELOPE_NAME, PROVENANCE_NAME
from localai.package.options import Signing
from localai.package.signing import SCRIPT
from localai.package.subjects import ArtifactFiles, VerifyError, check_subjects, read_artifact
from localai.scripts import script_file

PUBLIC_KEY_IN_SANDBOX = "public-key.pem"
USAGE = (
    "Usage: ./pants localai-verify --public-key=<pem> dist/backends/<name>/<accel>  "
    "(or an image folder / image.oci.tar; `-- /abs/path` outside the checkout)"
)


class VerifySubsystem(GoalSubsystem):
    name = "localai-verify"
    help = help_text(
        """
        Check a backend folder or its OCI image (layout folder or image.oci.tar) against its
        signed provenance: the DSSE envelope's signature with --public-key, its in-toto
        payloadType, and every subject's sha256 recomputed from the files.
        """
    )

    public_key = StrOption(default="", help="PEM public key (Ed25519 or ECDSA P-256) of the key that signed, e.g. `openssl pkey -in key.pem -pubout`.")
    paths = StrListOption(default=[], help="Folders or image tarballs to verify, besides those given as arguments (`-- /abs/path` outside the checkout).")
    # `./pants localai-verify -- /abs/path`: Pants reads what follows `--` into this option.
    paths._extra_kwargs["passthrough"] = True  # as ArgsListOption(passthrough=True) does


class VerifyGoal(Goal):
    subsystem_cls = VerifySubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


# dsse_tool.py verify's exit codes -> (cause, fix)
TOOL_FAILURES = {
    2: ("the public key is not usable", "Give the PEM public key of the signing key (`openssl pkey -in key.pem -pubout -out key.pub`)."),
    3: ("the envelope is not a DSSE envelope", "Package the backend again with [localai-signing].key_file set."),
    4: ("the envelope does not carry an in-toto statement", "Sign the provenance statement `pants package` writes, nothing else."),
    5: ("the signature does not verify",
        "Use the public key of the key that signed this build; if it is the right key, the envelope was changed: do not use this artifact."),
}


def artifact_paths(specs: Specs, passthrough: tuple[str, ...]) -> tuple[str, ...]:
    includes = specs.includes
    return (*(s.directory for s in includes.dir_literals), *(s.file for s in includes.file_literals), *passthrough)


async def verified_payload(files: ArtifactFiles, public_key: bytes, signing: Signing) -> tuple[bytes, str]:
    envelope_file = f"{files.where}/{ENVELOPE_NAME}"
    envelope = files.small.get(ENVELOPE_NAME)
    if envelope is None:
        raise VerifyError(f"no {ENVELOPE_NAME}: this build was not signed.", file=files.where,
                          fix="Package it with [localai-signing].key_file set (pants.toml or --localai-signing-key-file), then verify.")
    tool = await Get(Pex, PexRequest, signing.to_pex_request())
    inputs = await Get(
        Digest,
        CreateDigest([script_file("localai.package.scripts", SCRIPT), FileContent(PUBLIC_KEY_IN_SANDBOX, public_key), FileContent(ENVELOPE_NAME, envelope)]),
    )
    result = await Get(
        FallibleProcessResult,
        PexProcess(
            tool,
            argv=(SCRIPT, "verify", PUBLIC_KEY_IN_SANDBOX, ENVELOPE_NAME),
            input_digest=await Get(Digest, MergeDigests([tool.digest, inputs])),
            description=f"Verify the DSSE signature of {envelope_file}",
            level=LogLevel.DEBUG,
        ),
    )
    if result.exit_code != 0:
        cause, fix = TOOL_FAILURES.get(result.exit_code, ("the verifier failed", "Report this with the message above."))
        raise VerifyError(f"{cause}: {result.stderr.decode().strip().rstrip('.')}.", file=envelope_file, fix=fix)
    keyid = json.loads(envelope)["signatures"][0].get("keyid", "")
    return result.stdout, keyid


async def verify_one(console: Console, path: Path, where: str, public_key: bytes, signing: Signing) -> None:
    files = read_artifact(path, where)
    payload, keyid = await verified_payload(files, public_key, signing)
    console.print_stderr(f"{files.where}/{ENVELOPE_NAME}: DSSE signature verifies with the public key (keyid {keyid or 'none'}), payloadType in-toto")
    beside = files.small.get(PROVENANCE_NAME)
    if beside is not None and beside != payload:
        raise VerifyError("differs from the statement the envelope signs: it was edited after signing.", file=f"{files.where}/{PROVENANCE_NAME}",
                          fix="Trust only the signed payload; package the backend again to get a matching pair.")
    try:
        statement = json.loads(payload)
    except ValueError as e:
        raise VerifyError(f"the signed payload is not JSON ({e}).", file=f"{files.where}/{ENVELOPE_NAME}",
                          fix="Sign the statement `pants package` writes.") from None
    for name, sha256 in check_subjects(statement, files):
        console.print_stderr(f"  ok  {name}  sha256:{sha256}")
    console.print_stdout(
        f"Verified {files.where}: signed provenance ({statement.get('predicateType', '?')}), "
        f"{len(statement['subject'])} subject(s) match their files"
    )


@goal_rule
async def localai_verify(console: Console, specs: Specs, subsystem: VerifySubsystem, signing: Signing, build_root: BuildRoot) -> VerifyGoal:
    paths = artifact_paths(specs, tuple(subsystem.paths))
    if not paths:
        console.print_stderr(USAGE)
        return VerifyGoal(exit_code=1)
    try:
        if not subsystem.public_key:
            raise VerifyError("no public key given.", file="--localai-verify-public-key", fix=USAGE)
        key_path = build_root.pathlib_path / subsystem.public_key  # an absolute path stays itself
        if not key_path.is_file():
            raise VerifyError("does not exist.", file=f"--public-key={subsystem.public_key}", fix="Give the PEM public key file of the signing key.")
        public_key = key_path.read_bytes()
        for where in paths:
            await verify_one(console, build_root.pathlib_path / where, where, public_key, signing)
    except LocalAIError as e:
        console.print_stderr(f"localai-verify refused: {e}")
        return VerifyGoal(exit_code=1)
    return VerifyGoal(exit_code=0)


def rules():
    return collect_rules()
