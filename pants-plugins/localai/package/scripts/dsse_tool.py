"""DSSE envelopes of in-toto statements: sign with a PEM private key, verify with a PEM public key.

Runs as a process in the sandbox with the `signing` resolve's tool PEX (cryptography), shipped
by package/signing.py (packaging) and goals/verify.py (`pants localai-verify`); it imports only
the standard library and cryptography, so it keeps its own exit messages (errors.py).

The envelope is DSSE v1 (https://github.com/secure-systems-lab/dsse/blob/master/envelope.md):
  {"payload": base64(statement), "payloadType": "application/vnd.in-toto+json",
   "signatures": [{"keyid": <sha256 of the public key's DER SubjectPublicKeyInfo>, "sig": base64}]}
and what is signed is the pre-authentication encoding (PAE), never the JSON around it:
  "DSSEv1" SP len(type) SP type SP len(body) SP body     (lengths in ASCII decimal bytes)
Keys: Ed25519 (deterministic: the same statement and key give the same envelope, so a signed
build stays reproducible) or ECDSA P-256 with SHA-256 (DER signature, as cosign and
securesystemslib write it; randomized, so two signings differ).

  dsse_tool.py sign KEY.pem STATEMENT OUT          writes the envelope to OUT
  dsse_tool.py verify PUBLIC.pem ENVELOPE          prints the verified payload on stdout
Exit codes of verify (verify.py names the cause and the fix): 2 unreadable key, 3 the envelope
is not DSSE JSON, 4 payloadType is not in-toto, 5 no signature verifies with the key.
"""
from __future__ import annotations

import base64
import hashlib
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

PAYLOAD_TYPE = "application/vnd.in-toto+json"
BAD_KEY, BAD_ENVELOPE, BAD_PAYLOAD_TYPE, BAD_SIGNATURE = 2, 3, 4, 5


def pae(payload_type: str, payload: bytes) -> bytes:
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def keyid(public_key) -> str:
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def supported(key) -> bool:
    if isinstance(key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)):
        return True
    return isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)) and isinstance(key.curve, ec.SECP256R1)


def fail(code: int, message: str) -> int:
    print(message, file=sys.stderr)
    return code


def sign(key_path: str, statement_path: str, out_path: str) -> int:
    try:
        with open(key_path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
    except (ValueError, TypeError) as e:  # not PEM, encrypted, or not a private key
        return fail(BAD_KEY, f"not an unencrypted PEM private key ({e})")
    if not supported(key):
        return fail(BAD_KEY, f"a {type(key).__name__.lstrip('_')} key: only Ed25519 and ECDSA P-256 keys sign provenance")
    with open(statement_path, "rb") as f:
        payload = f.read()
    message = pae(PAYLOAD_TYPE, payload)
    sig = key.sign(message) if isinstance(key, ed25519.Ed25519PrivateKey) else key.sign(message, ec.ECDSA(hashes.SHA256()))
    envelope = {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": keyid(key.public_key()), "sig": base64.b64encode(sig).decode()}],
    }
    with open(out_path, "w") as f:
        f.write(json.dumps(envelope, indent=2, sort_keys=True) + "\n")  # model/records.py's canonical form
    return 0


def verified(public_key, signature: bytes, message: bytes) -> bool:
    try:
        if isinstance(public_key, ed25519.Ed25519PublicKey):
            public_key.verify(signature, message)
        else:
            public_key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def verify(public_path: str, envelope_path: str) -> int:
    try:
        with open(public_path, "rb") as f:
            public_key = serialization.load_pem_public_key(f.read())
    except (ValueError, TypeError) as e:
        return fail(BAD_KEY, f"not a PEM public key ({e})")
    if not supported(public_key):
        return fail(BAD_KEY, f"a {type(public_key).__name__.lstrip('_')} key: only Ed25519 and ECDSA P-256 keys verify provenance")
    try:
        with open(envelope_path, "rb") as f:
            envelope = json.load(f)
        payload_type = envelope["payloadType"]
        payload = base64.b64decode(envelope["payload"], validate=True)
        signatures = [base64.b64decode(s["sig"], validate=True) for s in envelope["signatures"]]
    except (ValueError, KeyError, TypeError) as e:
        return fail(BAD_ENVELOPE, f"not a DSSE envelope (payload, payloadType, signatures[].sig in base64): {e!r}")
    if payload_type != PAYLOAD_TYPE:
        return fail(BAD_PAYLOAD_TYPE, f"payloadType is {payload_type!r}, not {PAYLOAD_TYPE!r}")
    message = pae(payload_type, payload)
    if not any(verified(public_key, sig, message) for sig in signatures):
        return fail(
            BAD_SIGNATURE,
            f"none of its {len(signatures)} signature(s) verifies with the public key (keyid {keyid(public_key)}): "
            "signed by another key, or the payload was changed after signing",
        )
    sys.stdout.buffer.write(payload)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "sign":
        return sign(*argv[1:])
    if len(argv) == 3 and argv[0] == "verify":
        return verify(*argv[1:])
    return fail(64, __doc__ or "")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
