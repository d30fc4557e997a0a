"""Signed provenance end to end, in-process (RuleRunner): `package_backend_variant` signs the
fixture backend of backend_rule_test.py with a key made here, then the `localai-verify` goal checks
the folder, its OCI layout and its tarball, and refuses a tampered subject, another key, an edited
payload, an edited statement and a missing envelope, each naming the file.

Keys are made by openssl (Debian's `openssl`, independent of the cryptography the signer runs): an
envelope that openssl's Ed25519 also verifies over the PAE spelled here shows the DSSE encoding is
the spec's, not merely self-consistent.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import zstandard
from pants.core.goals.package import BuiltPackage
from pants.engine.fs import Digest, DigestContents, DigestEntries
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from localai.goals.verify import VerifyGoal
from localai.model.artifact import BackendVariantFieldSet
from localai.package.backend_rule_test import BACKENDS, FILES, FOLDER, package, repo_options
from localai.package.signing import ProvenanceEnvelope, ProvenanceEnvelopeRequest
from localai.testutil import layout_tool_options, make_rule_runner, pex_cli_options, repo_file

ENVELOPE = "provenance.intoto.dsse.json"
IMAGE = "dist/images/tiny/cpu"
KEY, PUB, OTHER_PUB = "keys/signing.pem", "keys/signing.pub", "keys/other.pub"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def options(key_file: str = KEY) -> list[str]:
    """backend_rule_test's options, the `signing` resolve (as pants.toml) and the key."""
    resolves = {**{f"{b}-cpu": f"lockfiles/{b}-cpu.lock" for b in BACKENDS}, "signing": "lockfiles/signing.lock"}
    return [
        *pex_cli_options(),
        *repo_options(),
        f"--python-resolves={resolves!r}",
        f"--python-resolves-to-constraints-file={ {f'{b}-cpu': '3rdparty/accelerators/cpu.txt' for b in BACKENDS}!r}",
        "--localai-signing-install-from-resolve=signing",
        "--localai-signing-requirements=['//3rdparty/signing:cryptography']",
        f"--localai-signing-key-file={key_file}",
        "--localai-oci-tarball",  # verify reads image.oci.tar too
        *layout_tool_options(),
    ]


ENV = {"PATH", "PYENV_ROOT", "HOME"}


@pytest.fixture(scope="module")
def signed(tmp_path_factory) -> tuple[RuleRunner, BuiltPackage]:
    rule_runner = make_rule_runner(
        QueryRule(BuiltPackage, [BackendVariantFieldSet]),
        QueryRule(DigestEntries, [Digest]),
        QueryRule(DigestContents, [Digest]),
        QueryRule(ProvenanceEnvelope, [ProvenanceEnvelopeRequest]),
    )
    keys = Path(rule_runner.build_root, "keys")
    keys.mkdir()
    openssl("genpkey", "-algorithm", "ed25519", "-out", "signing.pem", cwd=keys)
    openssl("pkey", "-in", "signing.pem", "-pubout", "-out", "signing.pub", cwd=keys)
    openssl("genpkey", "-algorithm", "ed25519", "-out", "other.pem", cwd=keys)
    openssl("pkey", "-in", "other.pem", "-pubout", "-out", "other.pub", cwd=keys)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ec.pem", cwd=keys)
    openssl("pkey", "-in", "ec.pem", "-pubout", "-out", "ec.pub", cwd=keys)
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "rsa.pem", cwd=keys)
    rule_runner.write_files(
        {
            **FILES,
            "lockfiles/signing.lock": repo_file("lockfiles/signing.lock"),
            "3rdparty/signing/BUILD": repo_file("3rdparty/signing/BUILD"),
        }
    )
    rule_runner.set_options(options(), env_inherit=ENV)
    result = package(rule_runner, "tiny")
    rule_runner.write_digest(result.digest, path_prefix="dist")
    return rule_runner, result


def verify(rule_runner: RuleRunner, *paths: str, public_key: str = PUB):
    return rule_runner.run_goal_rule(VerifyGoal, global_args=options(), args=[f"--public-key={public_key}", *paths], env_inherit=ENV)


def copy_of_folder(rule_runner: RuleRunner, name: str) -> Path:
    """A copy of the signed folder to tamper with (the original stays intact for the other tests)."""
    dest = Path(rule_runner.build_root, "copies", name)
    shutil.copytree(Path(rule_runner.build_root, "dist", FOLDER), dest)
    return dest


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_the_envelope_is_written_beside_the_statement_and_into_the_image(signed) -> None:
    rule_runner, result = signed
    artifacts = [a.relpath for a in result.artifacts]
    assert f"{FOLDER}/{ENVELOPE}" in artifacts
    folder = Path(rule_runner.build_root, "dist", FOLDER)
    envelope = json.loads((folder / ENVELOPE).read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    # The payload is the statement beside it, byte for byte; no machine path is in the envelope.
    statement = (folder / "provenance.intoto.json").read_bytes()
    assert base64.b64decode(envelope["payload"]) == statement
    assert rule_runner.build_root not in (folder / ENVELOPE).read_text()
    with tarfile.open(Path(rule_runner.build_root, IMAGE, "image.oci.tar")) as outer:
        layers = [outer.extractfile(m) for m in outer.getmembers() if m.name.startswith("blobs/sha256/") and m.isfile()]
        names = set()
        for layer in layers:
            data = layer.read()
            if data[:4] == b"\x28\xb5\x2f\xfd":  # a zstd frame
                data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
            try:
                with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                    names |= set(tar.getnames())
            except tarfile.ReadError:  # the config and manifest blobs are JSON
                continue
    assert ENVELOPE in names


def test_the_signature_is_dsse_pae_as_the_spec_spells_it(signed, tmp_path) -> None:
    rule_runner, _ = signed
    envelope = json.loads(Path(rule_runner.build_root, "dist", FOLDER, ENVELOPE).read_text())
    payload, kind = base64.b64decode(envelope["payload"]), envelope["payloadType"].encode()
    (tmp_path / "pae").write_bytes(b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload))
    (tmp_path / "sig").write_bytes(base64.b64decode(envelope["signatures"][0]["sig"]))
    out = subprocess.run(
        ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(Path(rule_runner.build_root, PUB)), "-rawin",
         "-in", "pae", "-sigfile", "sig"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert out.returncode == 0 and "Signature Verified Successfully" in out.stdout, out.stdout + out.stderr


def test_verify_accepts_the_folder_its_image_layout_and_its_tarball(signed) -> None:
    rule_runner, _ = signed
    result = verify(rule_runner, f"dist/{FOLDER}", IMAGE, f"{IMAGE}/image.oci.tar")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("5 subject(s) match their files") == 3
    for subject in ("site-packages", "start.py", "run.sh", "build-record.json", "sbom.cdx.json"):
        assert f"  ok  {subject}  sha256:" in result.stderr


def test_a_flipped_byte_in_a_subject_is_refused_naming_it(signed) -> None:
    rule_runner, _ = signed
    copy = copy_of_folder(rule_runner, "flipped")
    flip_a_byte(copy / "site-packages" / "grpc" / "__pycache__" / "__init__.cpython-311.pyc")
    result = verify(rule_runner, "copies/flipped")
    assert result.exit_code == 1
    assert "copies/flipped/site-packages: subject 'site-packages' was changed after signing" in result.stderr
    copy = copy_of_folder(rule_runner, "flipped-run-sh")
    flip_a_byte(copy / "run.sh")
    result = verify(rule_runner, "copies/flipped-run-sh")
    assert result.exit_code == 1 and "subject 'run.sh' was changed after signing" in result.stderr


def test_another_key_is_refused(signed) -> None:
    rule_runner, _ = signed
    result = verify(rule_runner, f"dist/{FOLDER}", public_key=OTHER_PUB)
    assert result.exit_code == 1
    assert f"dist/{FOLDER}/{ENVELOPE}: the signature does not verify" in result.stderr
    assert "Use the public key of the key that signed this build" in result.stderr


def test_an_edited_payload_is_refused(signed) -> None:
    rule_runner, _ = signed
    copy = copy_of_folder(rule_runner, "edited-payload")
    envelope = json.loads((copy / ENVELOPE).read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    flip_a_byte(copy / "run.sh")  # what an attacker would do: change a file, then its digest in the payload
    statement["subject"] = [
        {**s, "digest": {"sha256": hashlib.sha256((copy / "run.sh").read_bytes()).hexdigest()}} if s["name"] == "run.sh" else s
        for s in statement["subject"]
    ]
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    (copy / ENVELOPE).write_text(json.dumps(envelope))
    result = verify(rule_runner, "copies/edited-payload")
    assert result.exit_code == 1
    assert f"copies/edited-payload/{ENVELOPE}: the signature does not verify" in result.stderr


def test_an_edited_statement_beside_the_envelope_is_refused(signed) -> None:
    rule_runner, _ = signed
    copy = copy_of_folder(rule_runner, "edited-statement")
    path = copy / "provenance.intoto.json"
    path.write_text(path.read_text().replace("tiny", "tinier"))
    result = verify(rule_runner, "copies/edited-statement")
    assert result.exit_code == 1
    assert "copies/edited-statement/provenance.intoto.json: differs from the statement the envelope signs" in result.stderr


def test_a_missing_envelope_is_refused_with_the_fix(signed) -> None:
    rule_runner, _ = signed
    copy = copy_of_folder(rule_runner, "unsigned")
    (copy / ENVELOPE).unlink()
    result = verify(rule_runner, "copies/unsigned")
    assert result.exit_code == 1
    assert f"copies/unsigned: no {ENVELOPE}: this build was not signed" in result.stderr
    assert "[localai-signing].key_file" in result.stderr


def sign_with(rule_runner: RuleRunner, key_file: str) -> bytes:
    """Only the signing rule, with another key_file, on the fixture's statement: no re-packaging."""
    statement = Path(rule_runner.build_root, "dist", FOLDER, "provenance.intoto.json").read_bytes()
    rule_runner.set_options(options(key_file), env_inherit=ENV)
    try:
        envelope = rule_runner.request(ProvenanceEnvelope, [ProvenanceEnvelopeRequest("backends/tiny:cpu", statement)])
        (content,) = rule_runner.request(DigestContents, [envelope.digest])
        return content.content
    finally:
        rule_runner.set_options(options(), env_inherit=ENV)


def test_an_ecdsa_p256_key_signs_and_verifies(signed, tmp_path) -> None:
    rule_runner, _ = signed
    envelope = sign_with(rule_runner, "keys/ec.pem")
    copy = copy_of_folder(rule_runner, "ecdsa")
    (copy / ENVELOPE).write_bytes(envelope)
    result = verify(rule_runner, "copies/ecdsa", public_key="keys/ec.pub")
    assert result.exit_code == 0 and "5 subject(s) match their files" in result.stdout, result.stderr
    assert verify(rule_runner, "copies/ecdsa").exit_code == 1  # the Ed25519 key did not sign this one
    # openssl checks the DER ECDSA signature over the spec's PAE too.
    data = json.loads(envelope)
    payload, kind = base64.b64decode(data["payload"]), data["payloadType"].encode()
    (tmp_path / "pae").write_bytes(b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload))
    (tmp_path / "sig").write_bytes(base64.b64decode(data["signatures"][0]["sig"]))
    out = subprocess.run(["openssl", "dgst", "-sha256", "-verify", str(Path(rule_runner.build_root, "keys/ec.pub")),
                          "-signature", "sig", "pae"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and "Verified OK" in out.stdout, out.stdout + out.stderr


def test_an_rsa_or_missing_key_is_refused_naming_the_option(signed) -> None:
    rule_runner, _ = signed
    with pytest.raises(ExecutionError) as e:
        sign_with(rule_runner, "keys/rsa.pem")
    assert "[localai-signing].key_file = 'keys/rsa.pem': cannot sign the provenance of backends/tiny:cpu" in str(e.value)
    assert "only Ed25519 and ECDSA P-256 keys sign provenance" in str(e.value)
    with pytest.raises(ExecutionError) as e:
        sign_with(rule_runner, "keys/absent.pem")
    assert "[localai-signing].key_file = 'keys/absent.pem': names no file Pants can see." in str(e.value)
