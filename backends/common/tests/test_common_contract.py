"""LocalAI's contract pieces of backends/common, as pure logic: bearer token, model identity,
parent-watch settings, and the model slot's exclusion."""
import threading

import pytest

from backends.common import auth, identity, parent_watch
from backends.common.errors import Busy
from backends.common.lifecycle import Loaded, ModelSlot


@pytest.mark.parametrize(
    "metadata, ok",
    [
        ([("authorization", "Bearer s3cret")], True),
        ([("authorization", b"Bearer s3cret")], True),
        ([], False),
        ([("authorization", "Bearer s3cre")], False),
        ([("authorization", "Bearer s3crex")], False),  # differs in the last byte only
        ([("authorization", "s3cret")], False),
        ([("authorization", "Bearer s3cret ")], False),
        ([("authorization", "Bearer sécret")], False),  # non-ASCII must not raise
        ([("x-other", "Bearer s3cret")], False),
    ],
)
def test_bearer_token(metadata, ok):
    assert auth.authorized(metadata, "s3cret") is ok


def test_no_token_means_no_authentication():
    assert auth.authorized([], "") and auth.authorized([("authorization", "Bearer x")], "")
    assert auth.token_from_env({}) == "" and auth.token_from_env({"LOCALAI_GRPC_AUTH_TOKEN": "t"}) == "t"


def test_identity_mismatch_carries_localai_s_sentinel():
    message = identity.mismatch("a", "b")
    assert "model identity mismatch" in message and "'a'" in message and "'b'" in message
    assert identity.mismatch("a", "a") is None
    assert identity.mismatch("a", "") is None and identity.mismatch("", "b") is None


def test_guarded_rpcs_are_localai_s_list():
    # LocalAI's list (shared/reference/localai-contract.md): 25 RPCs, never the control ones.
    assert len(identity.GUARDED_RPCS) == 25
    assert {"Detect", "VAD", "TTSStream", "AudioTransform"} <= identity.GUARDED_RPCS
    assert not {"Health", "Status", "Free", "LoadModel", "AudioEncode", "Forward"} & identity.GUARDED_RPCS


@pytest.mark.parametrize(
    "raw, seconds",
    [("", 2.0), ("500ms", 0.5), ("2s", 2.0), ("1m", 60.0), ("3", 3.0), ("0.25", 0.25), ("1.5s", 1.5),
     ("0", 2.0), ("0ms", 2.0), ("-1s", 2.0), ("abc", 2.0), ("5h", 2.0), ("2 s", 2.0), ("250MS", 0.25)],
)
def test_watch_interval_is_go_style(raw, seconds):
    assert parent_watch.interval_seconds({"LOCALAI_BACKEND_PARENT_WATCH_INTERVAL": raw}) == seconds


@pytest.mark.parametrize("raw", ["false", "0", "no", "off", "OFF", " False "])
def test_watch_disabled_by_falsey_values(raw):
    assert not parent_watch.enabled({"LOCALAI_BACKEND_PARENT_WATCH": raw})


@pytest.mark.parametrize("raw", ["", "true", "1", "yes", "anything"])
def test_watch_enabled_otherwise(raw):
    assert parent_watch.enabled({"LOCALAI_BACKEND_PARENT_WATCH": raw})


def test_exclusive_waits_for_leases_and_refuses_new_ones():
    slot = ModelSlot()
    with slot.exclusive("load"):
        slot.set(Loaded(model="m1", options=None, path="", identity="a"))
    lease = slot.lease()
    assert lease.__enter__().model == "m1"
    swapped = threading.Event()

    def free():
        with slot.exclusive("free"):
            slot.set(None)
        swapped.set()

    t = threading.Thread(target=free)
    t.start()
    # Free cannot finish while the lease is held; meanwhile new leases are refused.
    while not slot.busy:
        pass
    assert not swapped.is_set()
    with pytest.raises(Busy):
        slot.lease().__enter__()
    with pytest.raises(Busy):
        slot.exclusive("load").__enter__()
    lease.__exit__(None, None, None)
    t.join(10)
    assert swapped.is_set() and slot.loaded is None
    with slot.lease() as loaded:
        assert loaded is None
