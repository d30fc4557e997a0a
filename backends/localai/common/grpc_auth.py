"""A small stand-in for LocalAI's backend/python/common/grpc_auth.py, written for this
repository's tests: the same entry point (`get_auth_interceptors()`) and the same behaviour
for the bearer token (LOCALAI_GRPC_AUTH_TOKEN set: every RPC needs
`authorization: Bearer <token>`, else UNAUTHENTICATED "invalid token")."""
import hmac
import os

import grpc


def _abort(request, context):
    context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid token")


class TokenAuthInterceptor(grpc.ServerInterceptor):
    def __init__(self, token):
        self._token = token
        self._reject = grpc.unary_unary_rpc_method_handler(_abort)

    def intercept_service(self, continuation, handler_call_details):
        auth = dict(handler_call_details.invocation_metadata).get("authorization", "")
        if not hmac.compare_digest(auth, "Bearer " + self._token):
            return self._reject
        return continuation(handler_call_details)


def get_auth_interceptors():
    token = os.environ.get("LOCALAI_GRPC_AUTH_TOKEN", "")
    return [TokenAuthInterceptor(token)] if token else []
