"""Serves a (synchronous) BaseServicer on a grpc.aio server.

Why asyncio: with grpc's thread-pool server a queued model call holds a pool thread, so
enough queued calls starve Health. Here queued calls wait as coroutines, and the threads
are split by role, so inference can never occupy what Health, Status, LoadModel and Free
need:
- Health and Status run on the event loop itself (they never block);
- LoadModel and Free run on their own small pool (they may wait for in-flight calls);
- model RPCs run on a pool of ``--workers`` threads, admitted by a semaphore of that size.
Every RPC of LocalAI's service is registered: first the bearer token is checked (also for
Health), then a request whose bytes do not parse as the RPC's message answers INVALID_ARGUMENT
naming the message type (grpcio's own answer is UNKNOWN "Unexpected <class 'DecodeError'>"),
then RPCs the servicer does not implement answer UNIMPLEMENTED.
"""
import asyncio
import os
import signal
import sys
from concurrent import futures

import grpc
from google.protobuf.message import DecodeError

from backends.proto import backend_pb2

from . import auth, parent_watch

MAX_MESSAGE_BYTES = 50 * 1024 * 1024
SERVICE = "backend.Backend"
LOOP_RPCS = frozenset({"Health", "Status"})
SWAP_RPCS = frozenset({"LoadModel", "Free"})  # may wait for in-flight calls: their own pool
CONTROL_THREADS = 4
_END = object()


class _Aborted(Exception):
    def __init__(self, code, details):
        super().__init__(details)
        self.code, self.details = code, details


class _ThreadContext:
    """What a synchronous RPC implementation sees as its ServicerContext."""

    def __init__(self, context):
        self._context = context
        self._ended = False

    def end(self) -> None:
        """The RPC's handler ended (a cancelled one too: grpc.aio reports done() only later)."""
        self._ended = True

    def abort(self, code, details):
        raise _Aborted(code, details)

    def is_active(self) -> bool:
        return not self._ended and not self._context.done()

    def invocation_metadata(self):
        return self._context.invocation_metadata()


class Undecodable:
    """What the request deserializer gives the handler for bytes that are not the RPC's message:
    the handler answers INVALID_ARGUMENT with ``details`` (a deserializer cannot set a status)."""

    def __init__(self, details: str):
        self.details = details


def request_deserializer(message_class):
    """``message_class.FromString`` that turns a DecodeError into an ``Undecodable``."""
    name = message_class.DESCRIPTOR.full_name

    def parse(data: bytes):
        try:
            return message_class.FromString(data)
        except DecodeError as exc:
            return Undecodable(f"request is not a valid {name}: {exc}")

    return parse


def _next(iterator):
    return next(iterator, _END)


class Dispatcher:
    def __init__(self, servicer, workers: int, token: str):
        self.servicer = servicer
        self.token = token
        self.inference = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="inference")
        self.control = futures.ThreadPoolExecutor(max_workers=CONTROL_THREADS, thread_name_prefix="control")
        self.slots = asyncio.Semaphore(workers)

    def _implementation(self, name):
        impl = getattr(type(self.servicer), name, None)
        return getattr(self.servicer, name) if getattr(impl, "__rpc_wrapped__", False) else None

    async def _admit(self, name, context, request=None):
        if not auth.authorized(context.invocation_metadata(), self.token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, auth.UNAUTHENTICATED_MESSAGE)
        if isinstance(request, Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.details)
        method = self._implementation(name)
        if method is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{name} is not served by this backend")
        return method

    def unary(self, name):
        async def handle(request, context):
            method = await self._admit(name, context, request)
            ctx = _ThreadContext(context)
            try:
                if name in LOOP_RPCS:
                    return method(request, ctx)
                loop = asyncio.get_running_loop()
                if name in SWAP_RPCS:
                    return await loop.run_in_executor(self.control, method, request, ctx)
                async with self.slots:
                    return await loop.run_in_executor(self.inference, method, request, ctx)
            except _Aborted as exc:
                await context.abort(exc.code, exc.details)

        return handle

    def stream(self, name):
        async def handle(request, context):
            method = await self._admit(name, context, request)
            loop = asyncio.get_running_loop()
            async with self.slots:
                ctx = _ThreadContext(context)
                iterator = method(request, ctx)
                step = None
                try:
                    while True:
                        step = loop.run_in_executor(self.inference, _next, iterator)
                        item = await step
                        if item is _END:
                            return
                        yield item
                except _Aborted as exc:
                    await context.abort(exc.code, exc.details)
                finally:
                    ctx.end()  # a step waiting on a worker (streaming.py) sees the client gone
                    # Closing releases the model lease; never while a step still runs.
                    if step is not None and not step.done():
                        step.add_done_callback(lambda _: self.inference.submit(iterator.close))
                    else:
                        await loop.run_in_executor(self.inference, iterator.close)

        return handle

    def unsupported(self, name):
        async def handle(request_iterator, context):
            await self._admit(name, context)
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{name} is not served by this backend")

        return handle

    def handler(self) -> grpc.GenericRpcHandler:
        handlers = {}
        for method in backend_pb2.DESCRIPTOR.services_by_name["Backend"].methods:
            request = getattr(backend_pb2, method.input_type.name)
            response = getattr(backend_pb2, method.output_type.name)
            codec = dict(request_deserializer=request_deserializer(request),
                         response_serializer=response.SerializeToString)
            if method.client_streaming:
                # No backend here takes a request stream; they answer UNIMPLEMENTED after auth
                # (without reading the stream, so its bytes are never parsed).
                make = (
                    grpc.stream_stream_rpc_method_handler
                    if method.server_streaming
                    else grpc.stream_unary_rpc_method_handler
                )
                handlers[method.name] = make(self.unsupported(method.name), **codec)
            elif method.server_streaming:
                handlers[method.name] = grpc.unary_stream_rpc_method_handler(self.stream(method.name), **codec)
            else:
                handlers[method.name] = grpc.unary_unary_rpc_method_handler(self.unary(method.name), **codec)
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    def shutdown(self):
        self.inference.shutdown(wait=False, cancel_futures=True)
        self.control.shutdown(wait=False, cancel_futures=True)


async def _serve(servicer, addr: str, workers: int, grace: float, environ) -> int:
    dispatcher = Dispatcher(servicer, workers, auth.token_from_env(environ))
    server = grpc.aio.server(
        options=[
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ]
    )
    server.add_generic_rpc_handlers((dispatcher.handler(),))
    try:
        port = server.add_insecure_port(addr)
    except RuntimeError as exc:
        print(f"cannot listen on {addr}: {exc}", file=sys.stderr)
        return 1
    if not port:
        print(f"cannot listen on {addr}", file=sys.stderr)
        return 1
    await server.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    parent_died = asyncio.Event()

    def on_parent_death():
        loop.call_soon_threadsafe(parent_died.set)
        loop.call_soon_threadsafe(stop.set)

    parent_watch.start(on_parent_death, environ)
    print(f"backend listening on {addr}", file=sys.stderr, flush=True)
    await stop.wait()
    await server.stop(grace)
    dispatcher.shutdown()
    return 1 if parent_died.is_set() else 0


def serve(servicer, addr: str, workers: int = 1, grace: float = 5.0, environ=None) -> int:
    code = asyncio.run(_serve(servicer, addr, workers, grace, os.environ if environ is None else environ))
    # A model call still running after the grace period must not keep the process alive
    # (its pool thread cannot be interrupted), least of all when the parent is gone.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
