"""LocalAI's parent-death watcher: a backend whose parent dies stops itself.

``LOCALAI_BACKEND_PARENT_WATCH``: on unless false/0/no/off (any case).
``LOCALAI_BACKEND_PARENT_WATCH_INTERVAL``: Go-style duration (500ms, 2s, 1m) or bare
seconds; default 2 s; invalid or non-positive falls back to 2 s. Not armed when already
orphaned at start-up (parent pid 1).
"""
import os
import re
import sys
import threading
from typing import Callable, Optional

ENV_ENABLED = "LOCALAI_BACKEND_PARENT_WATCH"
ENV_INTERVAL = "LOCALAI_BACKEND_PARENT_WATCH_INTERVAL"
DEFAULT_INTERVAL = 2.0
_DURATION = re.compile(r"^\+?(\d+(?:\.\d*)?|\.\d+)(ms|s|m)?$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def enabled(environ=None) -> bool:
    value = (os.environ if environ is None else environ).get(ENV_ENABLED, "").strip().lower()
    return value not in ("false", "0", "no", "off")


def interval_seconds(environ=None) -> float:
    raw = (os.environ if environ is None else environ).get(ENV_INTERVAL, "").strip().lower()
    match = _DURATION.match(raw)
    if not match:
        return DEFAULT_INTERVAL
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    return seconds if seconds > 0 else DEFAULT_INTERVAL


def start(on_parent_death: Callable[[], None], environ=None) -> Optional[threading.Thread]:
    """Poll ``getppid()`` on a daemon thread; call ``on_parent_death`` once it changes."""
    parent = os.getppid()
    if not enabled(environ) or parent <= 1:
        return None
    interval = interval_seconds(environ)
    stop = threading.Event()

    def watch():
        while not stop.wait(interval):
            if os.getppid() != parent:
                print(f"parent process {parent} is gone: stopping this backend", file=sys.stderr, flush=True)
                on_parent_death()
                return

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
