"""Signing the provenance statement: a DSSE envelope beside it when `[localai-signing].key_file` is set.

The key is a file under the build root, read by Pants as a file digest (so a changed key re-signs
and no machine path reaches any output) and linked into the sandbox as `signing-key.pem`; the
signer is dsse_tool.py with the `signing` resolve's cryptography. With no key nothing runs and
the folder is exactly the unsigned one (test_reproducible checks that unsigned builds are
bit-identical). The envelope is a file of the backend folder, so it is also in the OCI image's
small-files layer, next to the statement it signs.

Know this: the private key is an input of a process, so it is stored in Pants' local store
(~/.cache/pants/lmdb_store) like any input; sign only on a machine that keeps that cache private
(a CI runner, thrown away after the job), and never with a remote cache configured.
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.util_rules.pex import Pex, PexProcess, PexRequest
from pants.engine.fs import EMPTY_DIGEST, CreateDigest, Digest, DigestContents, DigestSubset, FileContent, MergeDigests, PathGlobs
from pants.engine.process import FallibleProcessResult
from pants.engine.rules import Get, collect_rules, rule
from pants.util.logging import LogLevel

from localai.errors import LocalAIError
from localai.model.folder import ENVELOPE_NAME, PROVENANCE_NAME
from localai.package.options import Signing
from localai.scripts import script_file

# DSSE envelope of provenance.intoto.json: not a `.sigstore` bundle (no certificate, no
# transparency-log entry), the envelope alone, which `cosign verify-blob-attestation
# --key`, in-toto and securesystemslib all read.
SCRIPT = "dsse_tool.py"
KEY_IN_SANDBOX = "signing-key.pem"


class SigningKeyError(LocalAIError):
    pass


@dataclass(frozen=True)
class ProvenanceEnvelopeRequest:
    target: str
    statement: bytes  # provenance.intoto.json, exactly as written into the folder


@dataclass(frozen=True)
class ProvenanceEnvelope:
    digest: Digest  # ENVELOPE_NAME at the root, or EMPTY_DIGEST when no key is set

    @property
    def signed(self) -> bool:
        return self.digest != EMPTY_DIGEST


def key_option_error(signing: Signing, cause: str, fix: str) -> SigningKeyError:
    return SigningKeyError(cause, file=f"[{Signing.options_scope}].key_file = {signing.key_file!r}", fix=fix)


@rule(desc="Sign the provenance statement (DSSE)", level=LogLevel.DEBUG)
async def sign_provenance(request: ProvenanceEnvelopeRequest, signing: Signing) -> ProvenanceEnvelope:
    if not signing.key_file:
        return ProvenanceEnvelope(EMPTY_DIGEST)
    if signing.key_file.startswith("/"):
        raise key_option_error(signing, "is an absolute path; Pants reads inputs from the build root only.",
                               "Copy the key into the checkout (uncommitted) and give its path relative to the build root.")
    key = await Get(DigestContents, PathGlobs([signing.key_file]))
    if len(key) != 1:
        raise key_option_error(
            signing, "names no file Pants can see.",
            "Check the path (relative to the build root), and that .gitignore and [GLOBAL].pants_ignore do not hide it.",
        )
    tool = await Get(Pex, PexRequest, signing.to_pex_request())
    inputs = await Get(
        Digest,
        CreateDigest(
            [
                script_file("localai.package.scripts", SCRIPT),
                FileContent(KEY_IN_SANDBOX, key[0].content),
                FileContent(PROVENANCE_NAME, request.statement),
            ]
        ),
    )
    result = await Get(
        FallibleProcessResult,
        PexProcess(
            tool,
            argv=(SCRIPT, "sign", KEY_IN_SANDBOX, PROVENANCE_NAME, ENVELOPE_NAME),
            input_digest=await Get(Digest, MergeDigests([tool.digest, inputs])),
            output_files=(ENVELOPE_NAME,),
            description=f"Sign the provenance of {request.target} (DSSE)",
            level=LogLevel.DEBUG,
        ),
    )
    if result.exit_code != 0:
        raise key_option_error(
            signing, f"cannot sign the provenance of {request.target}: {result.stderr.decode().strip()}",
            "Give an unencrypted PEM Ed25519 or ECDSA P-256 private key, e.g. `openssl genpkey -algorithm ed25519 -out key.pem`.",
        )
    return ProvenanceEnvelope(await Get(Digest, DigestSubset(result.output_digest, PathGlobs([ENVELOPE_NAME]))))


def rules():
    return collect_rules()
