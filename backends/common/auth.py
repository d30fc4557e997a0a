"""LocalAI's bearer-token authentication of every RPC (``LOCALAI_GRPC_AUTH_TOKEN``).

Unset or empty: no authentication. Set: each call, Health included, must carry metadata
``authorization: Bearer <token>``, else UNAUTHENTICATED "invalid token". Compared in
constant time; the token is never printed.
"""
import hmac
import os

ENV_TOKEN = "LOCALAI_GRPC_AUTH_TOKEN"
UNAUTHENTICATED_MESSAGE = "invalid token"


def token_from_env(environ=None) -> str:
    return (os.environ if environ is None else environ).get(ENV_TOKEN, "")


def authorized(metadata, token: str) -> bool:
    """Whether call ``metadata`` (pairs of key, value) carries ``token``; always with no token."""
    if not token:
        return True
    presented = ""
    for key, value in metadata or ():
        if key == "authorization":
            presented = value if isinstance(value, str) else value.decode("latin-1")
    # Bytes: compare_digest refuses non-ASCII str, and a client may send any header value.
    return hmac.compare_digest(presented.encode("utf-8"), f"Bearer {token}".encode("utf-8"))
