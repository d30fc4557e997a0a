"""A small stand-in for LocalAI's backend/python/common/grpc_auth.py, written for this
repository's tests: the same entry point (`get_auth_interceptors(*, aio=False)`, aio=True for
backends serving with grpc.aio) and the same behaviour for the bearer token
(LOCALAI_GRPC_AUTH_TOKEN set: every RPC needs `authorization: Bearer <token>`, else
UNAUTHENTICATED "invalid token"). LocalAI's own file adds model-identity interceptors, which a
copied tree brings with it."""
import hmac
import os

import grpc


def _abort(request, context):
    context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid token")


async def _abort_async(request, context):
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid token")


def _authorized(handler_call_details, token):
    auth = dict(handler_call_details.invocation_metadata).get("authorization", "")
    return hmac.compare_digest(auth, "Bearer " + token)


class TokenAuthInterceptor(grpc.ServerInterceptor):
    def __init__(self, token):
        self._token = token
        self._reject = grpc.unary_unary_rpc_method_handler(_abort)

    def intercept_service(self, continuation, handler_call_details):
        if not _authorized(handler_call_details, self._token):
            return self._reject
        return continuation(handler_call_details)


class AsyncTokenAuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, token):
        self._token = token
        self._reject = grpc.unary_unary_rpc_method_handler(_abort_async)

    async def intercept_service(self, continuation, handler_call_details):
        if not _authorized(handler_call_details, self._token):
            return self._reject
        return await continuation(handler_call_details)


def get_auth_interceptors(*, aio=False):
    token = os.environ.get("LOCALAI_GRPC_AUTH_TOKEN", "")
    if not token:
        return []
    return [AsyncTokenAuthInterceptor(token) if aio else TokenAuthInterceptor(token)]
