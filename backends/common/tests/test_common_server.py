import threading

import grpc
import pytest

from backends.common import server
from backends.common.errors import InvalidArgument, NotFound
from backends.common.testing import AbortError, FakeContext
from backends.proto import backend_pb2


class Toy(server.BaseServicer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.gate = threading.Event()
        self.entered = threading.Event()

    def load(self, request, path):
        if request.Type == "slow":
            self.entered.set()
            self.gate.wait(5)
        if request.Type == "boom":
            raise RuntimeError("kaboom")
        return object()

    def Predict(self, request, context):
        if not request.Prompt:
            raise InvalidArgument("Prompt is empty")
        self.require_model()
        return backend_pb2.Reply(message=request.Prompt.encode())

    def PredictStream(self, request, context):
        self.require_model()
        yield backend_pb2.Reply(message=b"a")
        raise NotFound("gone")


def code_of(fn):
    with pytest.raises(AbortError) as info:
        r = fn()
        if hasattr(r, "__next__"):
            list(r)
    return info.value.code, info.value.details


def test_health_and_status_before_load():
    s, ctx = Toy(), FakeContext()
    assert s.Health(backend_pb2.HealthMessage(), ctx).message == b"OK"
    assert s.Status(backend_pb2.HealthMessage(), ctx).state == backend_pb2.StatusResponse.UNINITIALIZED


def test_model_rpc_before_load_is_failed_precondition():
    s, ctx = Toy(), FakeContext()
    code, details = code_of(lambda: s.Predict(backend_pb2.PredictOptions(Prompt="x"), ctx))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert details == "no model loaded: call LoadModel first"


def test_errors_map_to_codes(tmp_path):
    s, ctx = Toy(), FakeContext()
    (tmp_path / "m").mkdir()
    assert s.Predict.__rpc_wrapped__
    assert code_of(lambda: s.Predict(backend_pb2.PredictOptions(), ctx))[0] == grpc.StatusCode.INVALID_ARGUMENT
    code, details = code_of(lambda: s.LoadModel(backend_pb2.ModelOptions(Model="zz", ModelPath=str(tmp_path)), ctx))
    assert code == grpc.StatusCode.NOT_FOUND and "zz" in details
    code, details = code_of(lambda: s.LoadModel(backend_pb2.ModelOptions(Model="m", ModelPath=str(tmp_path), Type="boom"), ctx))
    # A library failing on the model it was given is the model's fault: FAILED_PRECONDITION naming it.
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "kaboom" in details, (code, details)
    assert details.startswith(f"cannot load {tmp_path / 'm'}: RuntimeError: kaboom; check that it is ")
    assert s.Status(None, ctx).state == backend_pb2.StatusResponse.UNINITIALIZED
    assert s.LoadModel(backend_pb2.ModelOptions(Model="m", ModelPath=str(tmp_path)), ctx).success
    assert s.Status(None, ctx).state == backend_pb2.StatusResponse.READY
    code, _ = code_of(lambda: s.PredictStream(backend_pb2.PredictOptions(Prompt="x"), ctx))
    assert code == grpc.StatusCode.NOT_FOUND
    assert s.Predict(backend_pb2.PredictOptions(Prompt="ok"), ctx).message == b"ok"


def test_second_load_while_in_flight_is_aborted(tmp_path):
    s, ctx = Toy(), FakeContext()
    (tmp_path / "m").mkdir()
    req = backend_pb2.ModelOptions(Model="m", ModelPath=str(tmp_path), Type="slow")
    t = threading.Thread(target=s.LoadModel, args=(req, ctx))
    t.start()
    assert s.entered.wait(5)
    assert s.Status(None, ctx).state == backend_pb2.StatusResponse.BUSY
    code, details = code_of(lambda: s.LoadModel(req, ctx))
    assert code == grpc.StatusCode.ABORTED and "in flight" in details
    code, _ = code_of(lambda: s.Predict(backend_pb2.PredictOptions(Prompt="x"), ctx))
    assert code == grpc.StatusCode.ABORTED
    s.gate.set()
    t.join(5)
    assert s.Status(None, ctx).state == backend_pb2.StatusResponse.READY


def test_parse_args_workers_from_env():
    args = server.parse_args(["--addr", "127.0.0.1:5000"], environ={"PYTHON_GRPC_MAX_WORKERS": "3"})
    assert args.workers == 3 and args.addr == "127.0.0.1:5000"
    assert server.parse_args(["--addr", "h:1"], environ={}).workers == 1
    with pytest.raises(SystemExit):
        server.parse_args([], environ={})


def test_serve_builds_the_servicer_once_and_a_constructor_error_propagates():
    """Every backend's factory is a BaseServicer subclass taking ``workers``: there is no
    fallback that would build a second servicer when the first constructor raised TypeError."""
    calls = []

    def factory(**kw):
        calls.append(kw)
        raise TypeError("a bug inside the constructor")

    with pytest.raises(TypeError, match="a bug inside the constructor"):
        server.serve(factory, ["--addr", "127.0.0.1:0", "--workers", "3"])
    assert calls == [{"workers": 3}]
