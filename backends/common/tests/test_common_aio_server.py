"""The real ``serve()`` (grpc.aio) in a subprocess, over real gRPC: control RPCs answer
while every inference worker is held, Free waits for the call it would free, every RPC
of LocalAI's service is registered, and the bearer token guards them all."""
import os
import subprocess
import sys
import threading
import time

import grpc
import pytest

from backends.proto import backend_pb2, backend_pb2_grpc
from tests.integration.backend_process import free_port


class Toy:
    def __init__(self, tmp_path, workers=1, env=None):
        self.addr = f"127.0.0.1:{free_port()}"
        self.log = tmp_path / "server.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "backends.common.tests.toy_backend", "--addr", self.addr, "--workers", str(workers)],
            env={**os.environ, "LOCALAI_BACKEND_PARENT_WATCH": "off", **(env or {})},
            stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
        )
        self.channel = grpc.insecure_channel(self.addr)
        self.stub = backend_pb2_grpc.BackendStub(self.channel)
        grpc.channel_ready_future(self.channel).result(timeout=60)

    def close(self):
        self.channel.close()
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture
def toy(tmp_path, request):
    server = Toy(tmp_path, workers=getattr(request, "param", 1))
    assert server.stub.LoadModel(backend_pb2.ModelOptions(Model="toy"), timeout=30).success
    yield server
    server.close()


def hold(stub, gate, results):
    def call():
        try:
            results.append(stub.Predict(backend_pb2.PredictOptions(Prompt=f"hold:{gate}"), timeout=120).message)
        except grpc.RpcError as exc:
            results.append(exc.code())

    thread = threading.Thread(target=call)
    thread.start()
    return thread


def wait_for(path):
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_health_and_status_answer_while_the_only_worker_is_held(toy, tmp_path):
    results = []
    held = hold(toy.stub, tmp_path, results)
    wait_for(tmp_path / "entered")
    (tmp_path / "later").mkdir()
    later = []
    queued = [hold(toy.stub, tmp_path / "later", later) for _ in range(40)]  # queue behind the worker
    for _ in range(5):
        assert toy.stub.Health(backend_pb2.HealthMessage(), timeout=30).message == b"OK"
        assert toy.stub.Status(backend_pb2.HealthMessage(), timeout=30).state == backend_pb2.StatusResponse.READY
    assert held.is_alive() and not results  # the call is still held
    (tmp_path / "release").touch()
    held.join(60)
    assert results == [b"toy:alive"]
    (tmp_path / "later" / "release").touch()
    for t in queued:
        t.join(60)
    assert later == [b"toy:alive"] * 40


@pytest.mark.parametrize("toy", [2], indirect=True)  # a free worker, so a new call is not queued
def test_free_waits_for_the_call_in_flight(toy, tmp_path):
    results, freed = [], []
    held = hold(toy.stub, tmp_path, results)
    wait_for(tmp_path / "entered")
    free = threading.Thread(target=lambda: freed.append(toy.stub.Free(backend_pb2.HealthMessage(), timeout=60).success))
    free.start()
    # While Free waits, the backend is BUSY and new model calls are refused as retryable.
    deadline = time.monotonic() + 30
    while toy.stub.Status(backend_pb2.HealthMessage(), timeout=10).state != backend_pb2.StatusResponse.BUSY:
        assert time.monotonic() < deadline
    with pytest.raises(grpc.RpcError) as info:
        toy.stub.Predict(backend_pb2.PredictOptions(Prompt="x"), timeout=30)
    assert info.value.code() == grpc.StatusCode.ABORTED
    assert not freed and not results
    (tmp_path / "release").touch()
    held.join(60)
    free.join(60)
    assert results == [b"toy:alive"] and freed == [True]
    with pytest.raises(grpc.RpcError) as info:
        toy.stub.Predict(backend_pb2.PredictOptions(Prompt="x"), timeout=30)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_every_localai_rpc_is_registered_and_unserved_ones_are_unimplemented(toy):
    channel = toy.channel
    served = set()
    for method in backend_pb2.DESCRIPTOR.services_by_name["Backend"].methods:
        request = getattr(backend_pb2, method.input_type.name)()
        path = f"/backend.Backend/{method.name}"
        ser, de = request.SerializeToString, lambda b: b
        try:
            if method.client_streaming and method.server_streaming:
                list(channel.stream_stream(path, ser, de)(iter([request]), timeout=30))
            elif method.client_streaming:
                channel.stream_unary(path, ser, de)(iter([request]), timeout=30)
            elif method.server_streaming:
                list(channel.unary_stream(path, ser, de)(request, timeout=30))
            else:
                channel.unary_unary(path, ser, de)(request, timeout=30)
            served.add(method.name)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                served.add(method.name)
            else:
                assert method.name in exc.details(), exc.details()
    assert served == {"Health", "Free", "LoadModel", "Status", "Predict", "PredictStream"}


GARBAGE = b"\xff"  # a truncated varint: no message of the proto parses it


def test_undecodable_requests_answer_invalid_argument_naming_the_message_on_every_rpc(toy):
    """Raw bytes that are not the RPC's message, sent with an identity serializer: every RPC
    with a request message (served or not) answers INVALID_ARGUMENT naming its type, not
    grpcio's UNKNOWN "Unexpected <class 'DecodeError'>"; the server keeps serving."""
    identity = lambda b: b  # noqa: E731 (a one-line local helper)
    checked = []
    for method in backend_pb2.DESCRIPTOR.services_by_name["Backend"].methods:
        if method.client_streaming:  # never read: UNIMPLEMENTED (the registration test)
            continue
        path = f"/backend.Backend/{method.name}"
        call = (toy.channel.unary_stream if method.server_streaming else toy.channel.unary_unary)(path, identity, identity)
        with pytest.raises(grpc.RpcError) as info:
            reply = call(GARBAGE, timeout=30)
            if method.server_streaming:
                list(reply)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method.name, info.value.details())
        assert info.value.details().startswith(f"request is not a valid {method.input_type.full_name}: "), (
            method.name, info.value.details())
        checked.append(method.name)
    assert len(checked) >= 45 and {"Health", "LoadModel", "Predict", "PredictStream", "Embedding"} <= set(checked)
    assert toy.stub.Health(backend_pb2.HealthMessage(), timeout=30).message == b"OK"
    assert toy.stub.Predict(backend_pb2.PredictOptions(Prompt="x"), timeout=30).message == b"toy:alive"


def test_a_worker_thread_streams_and_its_error_keeps_its_status(toy):
    pieces = [r.message for r in toy.stub.PredictStream(backend_pb2.PredictOptions(Prompt="count:5"), timeout=30)]
    assert pieces == [b"0", b"1", b"2", b"3", b"4"]
    got = []
    with pytest.raises(grpc.RpcError) as info:
        for r in toy.stub.PredictStream(backend_pb2.PredictOptions(Prompt="fail"), timeout=30):
            got.append(r.message)
    assert got == [b"0"]
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "the worker refused the prompt"


def test_a_client_that_cancels_stops_the_worker(toy, tmp_path):
    call = toy.stub.PredictStream(backend_pb2.PredictOptions(Prompt=f"forever:{tmp_path}"), timeout=60)
    assert next(call).message == b"x"
    call.cancel()
    wait_for(tmp_path / "stopped")
    # The worker ended, and so did the stream's lease: Free does not wait for it.
    assert toy.stub.Free(backend_pb2.HealthMessage(), timeout=30).success


def test_token_guards_every_rpc_and_is_never_printed(tmp_path):
    token = "tok-" + "z" * 20
    server = Toy(tmp_path, env={"LOCALAI_GRPC_AUTH_TOKEN": token})
    try:
        for metadata in ([], [("authorization", "Bearer wrong")], [("authorization", f"Bearer {token[:-1]}y")]):
            for call in (
                lambda metadata=metadata: server.stub.Health(backend_pb2.HealthMessage(), metadata=metadata, timeout=30),
                lambda metadata=metadata: server.stub.LoadModel(backend_pb2.ModelOptions(Model="m"), metadata=metadata, timeout=30),
                lambda metadata=metadata: server.stub.Detect(backend_pb2.DetectOptions(), metadata=metadata, timeout=30),
            ):
                with pytest.raises(grpc.RpcError) as info:
                    call()
                assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        ok = [("authorization", f"Bearer {token}")]
        assert server.stub.Health(backend_pb2.HealthMessage(), metadata=ok, timeout=30).message == b"OK"
        assert server.stub.LoadModel(backend_pb2.ModelOptions(Model="m"), metadata=ok, timeout=30).success
        assert server.stub.Predict(backend_pb2.PredictOptions(Prompt="p"), metadata=ok, timeout=30).message == b"m:alive"
    finally:
        server.close()
    assert token not in server.log.read_text()
