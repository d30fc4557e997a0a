"""The loaded model as one object, and the rule that nothing frees it under a running call.

Every model RPC takes a *lease* on the current ``Loaded`` for its whole duration and reads
the model only through it. LoadModel and Free take the slot *exclusively*: new model RPCs
are refused with ABORTED (retryable), in-flight ones are waited for, and only then is the
old model released. So a native library's free can never run while a call is inside it.
"""
import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from .errors import Busy


@dataclass(frozen=True)
class Loaded:
    model: Any
    options: Any  # the LoadModel request (ModelOptions)
    path: str
    identity: str  # ModelOptions.Model, for the model-identity check


class ModelSlot:
    def __init__(self):
        self._cond = threading.Condition()
        self._loaded: Optional[Loaded] = None
        self._leases = 0
        self._exclusive = False

    @property
    def loaded(self) -> Optional[Loaded]:
        return self._loaded

    @property
    def busy(self) -> bool:
        return self._exclusive

    @contextlib.contextmanager
    def lease(self) -> Iterator[Optional[Loaded]]:
        """The current model (None when there is none), kept alive until the block ends."""
        with self._cond:
            if self._exclusive:
                raise Busy("a LoadModel or Free is in flight: retry when it has finished")
            loaded = self._loaded
            self._leases += 1
        try:
            yield loaded
        finally:
            with self._cond:
                self._leases -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self, what: str) -> Iterator["ModelSlot"]:
        """Refuse new leases, wait for the in-flight ones, then let the caller swap the model."""
        with self._cond:
            if self._exclusive:
                raise Busy(f"a LoadModel or Free is already in flight: cannot {what} now")
            self._exclusive = True
            while self._leases:
                self._cond.wait()
        try:
            yield self
        finally:
            with self._cond:
                self._exclusive = False

    def set(self, loaded: Optional[Loaded]) -> None:
        """Replace the model; only inside ``exclusive()``."""
        assert self._exclusive, "ModelSlot.set outside exclusive()"
        self._loaded = loaded
