"""A streaming RPC fed by a worker thread: the one way backends stream what a blocking engine
produces (transformers' generate, whisper.cpp's whisper_full) while it produces it.

``stream_from_thread(work, context)`` runs ``work(emit, stop)`` on its own thread and yields
every item the worker passes to ``emit``; the generator's return value is the worker's.
- The client cancels (``context.is_active()`` turns false) or the RPC stops reading (the
  generator is closed, e.g. at a stop string): ``stop`` is set and ``emit`` raises
  ``StreamStopped`` in the worker, which ends an engine at its next item; engines with a loop
  of their own (an abort callback) poll ``stop``. The generator waits for the worker to end, so
  the model lease of the RPC outlives every use of the model (Free never frees it under a worker).
- The worker raises: the same exception is raised in the RPC's thread, where
  ``backends.common.server`` maps it to its gRPC status (InvalidArgument -> INVALID_ARGUMENT,
  anything else INTERNAL), as a unary RPC's would be.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Generator

POLL_SECONDS = 0.1  # how often a silent worker's RPC checks that the client is still there
_ITEM, _END = object(), object()


class StreamStopped(Exception):
    """Raised by ``emit`` once the stream is stopped: the worker's cue to end."""


def stream_from_thread(
    work: Callable[[Callable[[Any], None], threading.Event], Any],
    context=None,
    *,
    name: str = "stream-worker",
    poll: float = POLL_SECONDS,
) -> Generator[Any, None, Any]:
    items: queue.Queue = queue.Queue()
    stop = threading.Event()
    outcome: dict = {}

    def emit(item) -> None:
        if stop.is_set():
            raise StreamStopped("the stream was stopped")
        items.put((_ITEM, item))

    def run() -> None:
        try:
            outcome["result"] = work(emit, stop)
        except StreamStopped:
            pass
        except BaseException as exc:  # re-raised in the RPC's thread
            outcome["error"] = exc
        finally:
            items.put((_END, None))

    def client_gone() -> bool:
        return context is not None and not context.is_active()

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    try:
        while True:
            try:
                kind, item = items.get(timeout=poll)
            except queue.Empty:
                if client_gone():
                    return None
                continue
            if kind is _END:
                break
            yield item
            if client_gone():
                return None
    finally:
        stop.set()
        worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")
