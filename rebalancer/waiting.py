"""Waiting for an event in a way a signal still ends."""

from __future__ import annotations

import threading

SIGNAL_POLL_SECONDS = 0.5


def wait_set(event: threading.Event) -> None:
    """Block until `event` is set, waking every half second. Python runs signal handlers only
    in the main thread, between bytecodes; the kernel may hand a SIGTERM to any other thread,
    and then nothing wakes a main thread blocked without a timeout, so the handler that would
    set `event` never runs."""
    while not event.wait(SIGNAL_POLL_SECONDS):
        pass
