"""stream_from_thread in process: order and return value, the worker's exception re-raised as
itself, and the worker stopped when the reader stops or the client goes away. (Over real gRPC:
test_common_aio_server.py.)"""
import threading

import pytest

from backends.common.errors import InvalidArgument
from backends.common.streaming import StreamStopped, stream_from_thread


class Client:
    """The one method of a ServicerContext the stream reads."""

    def __init__(self):
        self.active = True

    def is_active(self):
        return self.active


def test_items_in_order_then_the_workers_return_value():
    def work(emit, stop):
        for i in range(50):
            emit(i)
        return "done"

    stream = stream_from_thread(work)
    got = []
    with pytest.raises(StopIteration) as end:
        while True:
            got.append(next(stream))
    assert got == list(range(50)) and end.value.value == "done"


def test_the_workers_exception_is_raised_in_the_reader_as_itself():
    def work(emit, stop):
        emit("a")
        raise InvalidArgument("bad prompt")

    stream = stream_from_thread(work)
    assert next(stream) == "a"
    with pytest.raises(InvalidArgument, match="bad prompt"):
        next(stream)


def test_closing_the_stream_stops_the_worker_and_waits_for_it():
    seen = {}

    def work(emit, stop):
        try:
            while True:
                emit("x")
        except StreamStopped:
            seen["stopped"] = True
            raise
        finally:
            seen["thread"] = threading.current_thread()

    stream = stream_from_thread(work)
    assert next(stream) == "x"
    stream.close()
    assert seen["stopped"] and not seen["thread"].is_alive()


def test_a_client_gone_stops_a_worker_that_only_watches_stop():
    client, ran = Client(), threading.Event()

    def work(emit, stop):  # an engine's own loop (an abort callback): it never emits
        ran.set()
        client.active = False
        assert stop.wait(30), "the stream never set stop"
        return "unseen"

    assert list(stream_from_thread(work, client, poll=0.01)) == []
    assert ran.is_set()


def test_a_client_gone_between_items_ends_the_stream():
    client = Client()

    def work(emit, stop):
        emit(1)
        client.active = False
        emit(2)
        stop.wait(30)
        emit(3)  # raises StreamStopped: the worker ends

    assert list(stream_from_thread(work, client, poll=0.01)) == [1]
