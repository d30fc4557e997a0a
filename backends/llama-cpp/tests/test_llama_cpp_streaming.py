"""batching.Generation.chunks, the text stream PredictStream turns into Replies: one chunk per token
for a reader that keeps up, everything queued since the last read as one chunk for one that lags,
and the request's failure raised after the text before it."""
import threading

import pytest

from backends.common.testing import load_backend_module

batching = load_backend_module(__file__, "batching")


def generation():
    return batching.Generation(prompt=[1], max_tokens=8, sampler=None)


def test_a_reader_that_keeps_up_gets_one_chunk_per_token():
    gen, got = generation(), []
    reader_ready = threading.Semaphore(0)

    def produce():
        for piece in ("Hel", "lo", " world"):
            reader_ready.acquire()  # the reader is waiting in get(): nothing else is queued
            gen.out.put(piece)
        reader_ready.acquire()
        gen.out.put(batching._DONE)

    threading.Thread(target=produce, daemon=True).start()
    stream = gen.chunks()
    while True:
        reader_ready.release()
        try:
            got.append(next(stream))
        except StopIteration:
            break
    assert got == ["Hel", "lo", " world"]


def test_a_lagging_reader_gets_the_queued_text_as_one_chunk():
    gen = generation()
    for piece in ("a", "b", "c"):
        gen.out.put(piece)
    stream = gen.chunks()
    assert next(stream) == "abc"
    gen.out.put("d")
    gen.out.put("e")
    gen.out.put(batching._DONE)
    assert list(stream) == ["de"]


def test_a_failure_is_raised_after_the_text_queued_before_it():
    gen = generation()
    gen.out.put("partial")
    gen.out.put(RuntimeError("llama_decode failed"))
    stream = gen.chunks()
    assert next(stream) == "partial"
    with pytest.raises(RuntimeError, match="llama_decode failed"):
        next(stream)


def test_done_with_nothing_queued_ends_the_stream():
    gen = generation()
    gen.out.put(batching._DONE)
    assert list(gen.chunks()) == []
