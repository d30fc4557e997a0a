"""gRPC server runtime shared by every Python backend.

``serve(servicer_factory)`` is what each backend's ``main()`` calls. ``BaseServicer`` gives
Health, Status, Free and LoadModel; every RPC a subclass defines is wrapped so that
``backends.common.errors`` exceptions become the matching gRPC status code and any other
exception becomes INTERNAL (FAILED_PRECONDITION naming the model when ``load`` raises it:
``model_files.load_failure``), and the server keeps serving. The wrapper also gives each model
RPC a lease on the loaded model (``lifecycle``) and applies LocalAI's model-identity check
(``identity``); ``aio_server`` adds the bearer token, the parent watch and the threads.
"""

import argparse
import functools
import inspect
import os
import sys
import threading
import traceback
from typing import Callable

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
from .identity import GUARDED_RPCS, mismatch
from .lifecycle import Loaded, ModelSlot
from .model_files import load_failure
from .paths import resolve_model_path

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


_current = threading.local()  # .loaded: the Loaded the running model RPC holds a lease on


@functools.lru_cache(maxsize=None)
def _has_identity(request_type) -> bool:
    return "ModelIdentity" in request_type.DESCRIPTOR.fields_by_name


class _Lease:
    """A model RPC's lease, with the identity check LocalAI applies to the guarded RPCs."""

    def __init__(self, servicer, name, request):
        self._cm = servicer._slot.lease()
        self._name, self._request = name, request

    def __enter__(self):
        loaded = self._cm.__enter__()
        try:
            request = self._request
            if loaded is not None and self._name in GUARDED_RPCS and _has_identity(type(request)):
                wrong = mismatch(loaded.identity, request.ModelIdentity)
                if wrong:
                    raise NotFound(wrong)
        except BaseException:
            self._cm.__exit__(None, None, None)
            raise
        return loaded

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


class _Holding:
    """Makes ``loaded`` the model ``require_model()`` sees on this thread."""

    def __init__(self, loaded):
        self._loaded = loaded

    def __enter__(self):
        self._saved = getattr(_current, "loaded", None)
        _current.loaded = self._loaded

    def __exit__(self, *exc):
        _current.loaded = self._saved


def wrap_rpc(name: str, func: Callable) -> Callable:
    """Map exceptions raised by an RPC implementation to gRPC status codes.

    Model RPCs (all but Health/Status/Free/LoadModel) hold a lease on the loaded model for
    their whole run, streams included, so Free/LoadModel wait for them to end.
    """
    if getattr(func, "__rpc_wrapped__", False):
        return func
    leased = name not in CONTROL_RPCS

    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def stream_wrapper(self, request, context):
            try:
                with (_Lease(self, name, request) if leased else _Holding(None)) as loaded:
                    inner = func(self, request, context)
                    try:
                        while True:
                            # Each step may run on another thread: hold the lease there.
                            with _Holding(loaded):
                                try:
                                    item = next(inner)
                                except StopIteration:
                                    return
                            yield item
                    finally:
                        inner.close()
            except Exception as exc:
                _abort(name, exc, context)

        wrapper = stream_wrapper
    else:

        @functools.wraps(func)
        def unary_wrapper(self, request, context):
            try:
                if not leased:
                    return func(self, request, context)
                with _Lease(self, name, request) as loaded, _Holding(loaded):
                    return func(self, request, context)
            except Exception as exc:
                _abort(name, exc, context)

        wrapper = unary_wrapper
    wrapper.__rpc_wrapped__ = True
    return wrapper


class BaseServicer(backend_pb2_grpc.BackendServicer):
    """Health/Status/Free/LoadModel plumbing; subclasses implement ``load(request, path)``.

    ``load`` returns the loaded model object (anything non-None); model RPCs get it from
    ``self.require_model()`` (or ``self.model``), which is the model their lease holds.
    ``unload()`` may be overridden to release ``self.model``; it runs only when no model
    RPC is in flight. RPCs not implemented answer UNIMPLEMENTED.
    """

    # Whether load() accepts an empty ModelOptions.Model (e.g. a bundled default model).
    allow_empty_model = False
    # What load() reads, for the message when it fails on a model (model_files.load_failure).
    model_expects = "a model this backend reads"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in RPC_NAMES:
            if name in cls.__dict__:
                setattr(cls, name, wrap_rpc(name, cls.__dict__[name]))

    def __init__(self, workers: int = 1):  # the server bounds concurrency: aio_server
        self._slot = ModelSlot()

    # ---- hooks for subclasses ---------------------------------------------------------
    def resolve_path(self, request) -> str:
        """Local path (or remote id) of the model to load. Override for special cases."""
        if not request.Model and self.allow_empty_model:
            return ""
        return resolve_model_path(request.Model, request.ModelPath)

    def load(self, request, path):  # pragma: no cover - abstract
        raise Unimplemented(f"{type(self).__name__} does not implement LoadModel")

    def unload(self) -> None:
        """Release ``self.model`` (called with no model RPC in flight)."""
        import gc

        gc.collect()

    # ---- the loaded model ---------------------------------------------------------------
    def _loaded(self):
        held = getattr(_current, "loaded", None)
        return held if held is not None else self._slot.loaded

    @property
    def model(self):
        loaded = self._loaded()
        return loaded.model if loaded else None

    @model.setter
    def model(self, value) -> None:
        """Install a model without LoadModel (unit tests), with the same exclusion."""
        with self._slot.exclusive("set the model"):
            self._slot.set(None if value is None else Loaded(model=value, options=None, path="", identity=""))

    @property
    def model_options(self):
        loaded = self._loaded()
        return loaded.options if loaded else None

    @property
    def model_path(self) -> str:
        loaded = self._loaded()
        return loaded.path if loaded else ""

    @property
    def state(self):
        if self._slot.busy:
            return backend_pb2.StatusResponse.BUSY
        if self._slot.loaded is not None:
            return backend_pb2.StatusResponse.READY
        return backend_pb2.StatusResponse.UNINITIALIZED

    def require_model(self):
        """The model this RPC's lease holds, or FAILED_PRECONDITION when there is none."""
        model = self.model
        if model is None:
            raise FailedPrecondition(NO_MODEL_MESSAGE)
        return model

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
        except Exception:
            pass
        return backend_pb2.StatusResponse(state=self.state, memory=memory)

    def Free(self, request, context):
        with self._slot.exclusive("free"):
            if self._slot.loaded is not None:
                self.unload()
                self._slot.set(None)
        return backend_pb2.Result(success=True, message="model freed")

    def LoadModel(self, request, context):
        with self._slot.exclusive("load a model"):
            path = self.resolve_path(request)
            if self._slot.loaded is not None:
                self.unload()
                self._slot.set(None)
            try:
                model = self.load(request, path)
            except BackendError:
                raise
            except Exception as exc:
                # A library failing on the model it was given (corrupt, wrong format, a Hub that
                # cannot be reached) is the model's fault, not the server's: FAILED_PRECONDITION
                # naming it. The traceback still goes to stderr, for the bug it may also be.
                print(f"LoadModel of {path or '(default model)'} failed:", file=sys.stderr)
                traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
                raise load_failure(path, self.model_expects, exc) from exc
            if model is None:
                raise RuntimeError("load() returned no model")
            self._slot.set(Loaded(model=model, options=request, path=path, identity=request.Model))
        return backend_pb2.Result(success=True, message=f"model loaded: {path or '(bundled)'}")


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
    """Run the gRPC server until SIGTERM/SIGINT or the parent's death. ``servicer_factory(workers=N)``."""
    from . import aio_server

    args = parse_args(sys.argv[1:] if argv is None else argv)
    servicer = servicer_factory(workers=args.workers)
    return aio_server.serve(servicer, args.addr, workers=args.workers, grace=args.grace)


def run(servicer_factory, argv=None) -> None:
    """``sys.exit(serve(...))``: what a backend's ``main()`` calls."""
    sys.exit(serve(servicer_factory, argv))
