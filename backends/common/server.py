"""gRPC server runtime shared by every Python backend.

``serve(servicer_factory)`` is what each backend's ``main()`` calls. ``BaseServicer`` gives
Health, Status, Free and a locked LoadModel; every RPC a subclass defines is wrapped so that
``backends.common.errors`` exceptions become the matching gRPC status code and any other
exception becomes INTERNAL, and the server keeps serving.
"""

import argparse
import functools
import inspect
import os
import signal
import sys
import threading
import traceback
from concurrent import futures
from typing import Callable, Optional

import grpc

from backends.proto import backend_pb2, backend_pb2_grpc

from .errors import (  # noqa: F401 (re-exported for backends)
    NO_MODEL_MESSAGE,
    BackendError,
    Busy,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unimplemented,
    require,
)
from .paths import resolve_model_path

MAX_MESSAGE_BYTES = 50 * 1024 * 1024
# Threads beyond --workers that keep Health/Status/LoadModel/Free answering while every
# worker is busy running the model. Model RPCs queued for a worker hold a pool thread too, so
# this also bounds how many queued requests Health can wait behind (4 was starved by 8 clients).
CONTROL_THREADS = 32
CONTROL_RPCS = frozenset({"Health", "Status", "Free", "LoadModel"})
RPC_NAMES = frozenset(
    name
    for name, value in vars(backend_pb2_grpc.BackendServicer).items()
    if callable(value) and not name.startswith("_")
)


def _status_code(exc: BaseException) -> grpc.StatusCode:
    if isinstance(exc, BackendError):
        return getattr(grpc.StatusCode, exc.code, grpc.StatusCode.INTERNAL)
    if isinstance(exc, NotImplementedError):
        return grpc.StatusCode.UNIMPLEMENTED
    return grpc.StatusCode.INTERNAL


def _message(exc: BaseException) -> str:
    if isinstance(exc, BackendError):
        return exc.message
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if str(exc) else text


def _abort(name: str, exc: BaseException, context) -> None:
    code = _status_code(exc)
    if code == grpc.StatusCode.INTERNAL:
        print(f"{name} failed:", file=sys.stderr)
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    context.abort(code, _message(exc))


def wrap_rpc(name: str, func: Callable) -> Callable:
    """Map exceptions raised by an RPC implementation to gRPC status codes.

    Model RPCs (all but Health/Status/Free/LoadModel) also take the servicer's inference
    semaphore, which bounds concurrent inference to ``--workers``.
    """
    if getattr(func, "__rpc_wrapped__", False):
        return func
    limited = name not in CONTROL_RPCS

    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def stream_wrapper(self, request, context):
            sem = self._inference_slots if limited else None
            if sem is not None:
                sem.acquire()
            try:
                try:
                    yield from func(self, request, context)
                except Exception as exc:  # noqa: BLE001
                    _abort(name, exc, context)
            finally:
                if sem is not None:
                    sem.release()

        wrapper = stream_wrapper
    else:

        @functools.wraps(func)
        def unary_wrapper(self, request, context):
            sem = self._inference_slots if limited else None
            if sem is not None:
                sem.acquire()
            try:
                try:
                    return func(self, request, context)
                except Exception as exc:  # noqa: BLE001
                    _abort(name, exc, context)
            finally:
                if sem is not None:
                    sem.release()

        wrapper = unary_wrapper
    wrapper.__rpc_wrapped__ = True
    return wrapper


class BaseServicer(backend_pb2_grpc.BackendServicer):
    """Health/Status/Free/LoadModel plumbing; subclasses implement ``load(request, path)``.

    ``load`` returns the loaded model object (anything non-None) which is stored in
    ``self.model``; ``unload()`` may be overridden to release it. Model RPCs call
    ``self.require_model()`` first. RPCs not implemented answer UNIMPLEMENTED.
    """

    # Whether load() accepts an empty ModelOptions.Model (e.g. a bundled default model).
    allow_empty_model = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in RPC_NAMES:
            if name in cls.__dict__:
                setattr(cls, name, wrap_rpc(name, cls.__dict__[name]))

    def __init__(self, workers: int = 1):
        self.model = None
        self.model_options = None
        self.model_path = ""
        self._state = backend_pb2.StatusResponse.UNINITIALIZED
        self._load_lock = threading.Lock()
        self._inference_slots = threading.BoundedSemaphore(max(1, int(workers)))

    # ---- hooks for subclasses ---------------------------------------------------------
    def resolve_path(self, request) -> str:
        """Local path (or remote id) of the model to load. Override for special cases."""
        if not request.Model and self.allow_empty_model:
            return ""
        return resolve_model_path(request.Model, request.ModelPath)

    def load(self, request, path):  # pragma: no cover - abstract
        raise Unimplemented(f"{type(self).__name__} does not implement LoadModel")

    def unload(self) -> None:
        self.model = None
        try:
            import gc

            gc.collect()
        except Exception:  # noqa: BLE001
            pass

    # ---- state --------------------------------------------------------------------------
    @property
    def state(self):
        return self._state

    def require_model(self):
        """The loaded model, or FAILED_PRECONDITION / ABORTED when there is none."""
        if self._state == backend_pb2.StatusResponse.BUSY:
            raise Busy("a LoadModel is in flight: retry when it has finished")
        if self.model is None:
            raise FailedPrecondition(NO_MODEL_MESSAGE)
        return self.model

    # ---- RPCs ---------------------------------------------------------------------------
    def Health(self, request, context):
        return backend_pb2.Reply(message=b"OK")

    def Status(self, request, context):
        memory = backend_pb2.MemoryUsageData()
        try:
            import resource

            rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            memory.total = int(rss_kib) * 1024
            memory.breakdown["max_rss"] = int(rss_kib) * 1024
        except Exception:  # noqa: BLE001
            pass
        return backend_pb2.StatusResponse(state=self._state, memory=memory)

    def Free(self, request, context):
        if not self._load_lock.acquire(blocking=False):
            raise Busy("a LoadModel is in flight: cannot free now")
        try:
            self.unload()
            self.model = None
            self.model_options = None
            self._state = backend_pb2.StatusResponse.UNINITIALIZED
        finally:
            self._load_lock.release()
        return backend_pb2.Result(success=True, message="model freed")

    def LoadModel(self, request, context):
        if not self._load_lock.acquire(blocking=False):
            raise Busy("a LoadModel is already in flight")
        previous_state = self._state
        try:
            self._state = backend_pb2.StatusResponse.BUSY
            path = self.resolve_path(request)
            if self.model is not None:
                self.unload()
                self.model = None
            model = self.load(request, path)
            if model is None:
                raise RuntimeError("load() returned no model")
            self.model = model
            self.model_options = request
            self.model_path = path
            self._state = backend_pb2.StatusResponse.READY
            return backend_pb2.Result(success=True, message=f"model loaded: {path or '(bundled)'}")
        except BaseException:
            if self.model is None:
                self._state = (
                    backend_pb2.StatusResponse.UNINITIALIZED
                    if previous_state != backend_pb2.StatusResponse.ERROR
                    else previous_state
                )
            else:
                self._state = backend_pb2.StatusResponse.READY
            raise
        finally:
            self._load_lock.release()


# Wrap BaseServicer's own RPCs too.
for _name in CONTROL_RPCS:
    setattr(BaseServicer, _name, wrap_rpc(_name, BaseServicer.__dict__[_name]))


def default_workers(environ=None) -> int:
    environ = os.environ if environ is None else environ
    raw = environ.get("PYTHON_GRPC_MAX_WORKERS", "").strip()
    if not raw:
        return 1
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"PYTHON_GRPC_MAX_WORKERS={raw!r} is not an integer") from None
    if value < 1:
        raise SystemExit(f"PYTHON_GRPC_MAX_WORKERS={raw!r} must be >= 1")
    return value


def parse_args(argv=None, environ=None):
    parser = argparse.ArgumentParser(description="LocalAI gRPC backend")
    parser.add_argument("--addr", required=True, help="host:port to listen on (LocalAI passes it)")
    parser.add_argument(
        "--workers",
        type=int,
        default=default_workers(environ),
        help="concurrent inference RPCs (default: $PYTHON_GRPC_MAX_WORKERS or 1)",
    )
    parser.add_argument("--grace", type=float, default=5.0, help="seconds to drain on SIGTERM")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    if ":" not in args.addr:
        parser.error(f"--addr {args.addr!r} must be host:port")
    return args


def serve(servicer_factory: Callable[..., BaseServicer], argv=None) -> int:
    """Run the gRPC server until SIGTERM/SIGINT. ``servicer_factory(workers=N)``."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    options = [
        ("grpc.max_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ]
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=args.workers + CONTROL_THREADS), options=options
    )
    try:
        servicer = servicer_factory(workers=args.workers)
    except TypeError:
        servicer = servicer_factory()
    backend_pb2_grpc.add_BackendServicer_to_server(servicer, server)
    try:
        port = server.add_insecure_port(args.addr)
    except RuntimeError as exc:
        print(f"cannot listen on {args.addr}: {exc}", file=sys.stderr)
        return 1
    if not port:
        print(f"cannot listen on {args.addr}", file=sys.stderr)
        return 1
    server.start()
    stop = threading.Event()

    def _on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    print(f"backend listening on {args.addr}", file=sys.stderr, flush=True)
    while not stop.wait(0.5):
        pass
    server.stop(args.grace).wait()
    return 0


def run(servicer_factory, argv=None) -> None:
    """``sys.exit(serve(...))``: what a backend's ``main()`` calls."""
    sys.exit(serve(servicer_factory, argv))
