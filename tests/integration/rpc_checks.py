"""Assertions shared by the integration tests: status codes, health, LoadModel in flight."""
from __future__ import annotations

import threading
import time
from typing import Callable

import grpc
import pytest

from backends.proto import backend_pb2

Code = grpc.StatusCode


def expect_code(code: grpc.StatusCode, call: Callable, *args, **kwargs) -> grpc.RpcError:
    """Call ``call(*args, **kwargs)`` (a unary RPC, or a streaming one whose replies are read to
    the end) and assert it fails with ``code``. Returns the error for further checks."""
    kwargs.setdefault("timeout", 120)
    with pytest.raises(grpc.RpcError) as info:
        reply = call(*args, **kwargs)
        if hasattr(reply, "__iter__") and not hasattr(reply, "ListFields"):
            list(reply)
    err = info.value
    assert err.code() == code, f"expected {code}, got {err.code()}: {err.details()}"
    assert err.details(), "an error status must say what is wrong"
    return err


def undecodable_requests_are_invalid_argument(channel: grpc.Channel, rpcs: list[str]) -> None:
    """Raw bytes that parse as no message (a truncated varint), sent to each of ``rpcs`` with an
    identity serializer, answer INVALID_ARGUMENT naming the RPC's request type."""
    methods = backend_pb2.DESCRIPTOR.services_by_name["Backend"].methods_by_name
    for name in rpcs:
        method = methods[name]
        make = channel.unary_stream if method.server_streaming else channel.unary_unary
        call = make(f"/backend.Backend/{name}", request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as info:
            reply = call(b"\xff", timeout=60)
            if method.server_streaming:
                list(reply)
        err = info.value
        assert err.code() == Code.INVALID_ARGUMENT, f"{name}: {err.code()}: {err.details()}"
        assert err.details().startswith(f"request is not a valid {method.input_type.full_name}: "), err.details()


def assert_healthy(stub) -> None:
    assert stub.Health(backend_pb2.HealthMessage(), timeout=10).message == b"OK"


def state(stub) -> int:
    return stub.Status(backend_pb2.HealthMessage(), timeout=10).state


def second_load_is_aborted(
    stub,
    options: backend_pb2.ModelOptions,
    model_rpc: Callable[[], object] | None = None,
    attempts: int = 8,
) -> grpc.RpcError:
    """Start LoadModel(options); while Status says BUSY, send a second LoadModel (and, when
    given, a model RPC): both must answer ABORTED, and the first load must still succeed.

    A load can be quicker than the Status poll; the attempt is then repeated.
    """
    for _ in range(attempts):
        first = stub.LoadModel.future(options, timeout=600)
        busy = False
        deadline = time.monotonic() + 120
        while not first.done() and time.monotonic() < deadline:
            if state(stub) == backend_pb2.StatusResponse.BUSY:
                busy = True
                break
            time.sleep(0.002)
        second_err = model_err = None
        if busy:
            try:
                stub.LoadModel(options, timeout=600)
            except grpc.RpcError as e:
                second_err = e
            if model_rpc is not None and second_err is not None:
                try:
                    model_rpc()
                except grpc.RpcError as e:
                    model_err = e
        result = first.result()
        assert result.success, result.message
        if second_err is not None and second_err.code() == Code.ABORTED:
            # The model RPC may have raced with the end of the load; only check it when it failed.
            if model_err is not None:
                assert model_err.code() == Code.ABORTED, (model_err.code(), model_err.details())
            assert state(stub) == backend_pb2.StatusResponse.READY
            return second_err
        if second_err is not None:
            pytest.fail(f"second LoadModel failed with {second_err.code()}, expected ABORTED: {second_err.details()}")
    pytest.fail(f"never caught a LoadModel in flight in {attempts} attempts")


def hammer(call: Callable[[int, int], None], clients: int, requests: int) -> list[BaseException]:
    """Run ``call(client, i)`` ``requests`` times from each of ``clients`` threads at once;
    return every exception raised."""
    failures: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def worker(client: int) -> None:
        start.wait()
        for i in range(requests):
            try:
                call(client, i)
            except BaseException as exc:
                with lock:
                    failures.append(exc)

    threads = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures
