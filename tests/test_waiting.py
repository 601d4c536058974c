"""A controller told to stop by SIGTERM stops, whichever of its threads the kernel hands the
signal to."""

from __future__ import annotations

import signal
import threading
import time

from rebalancer.waiting import wait_set


def test_a_signal_handed_to_another_thread_still_ends_the_wait() -> None:
    """The handler runs in the main thread only; `stop.wait()` without a timeout slept on when
    the signal went to another thread (seen in CI: a replica sent SIGTERM kept cycling until
    it lost its lease). The watchdog ends the wait after 4 s whatever happens."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda *_: stop.set())
    watchdog = threading.Timer(4.0, stop.set)
    try:
        sleeper = threading.Thread(target=time.sleep, args=(5,), daemon=True)
        sleeper.start()
        assert sleeper.ident is not None
        watchdog.start()
        threading.Timer(0.2, signal.pthread_kill, (sleeper.ident, signal.SIGUSR1)).start()
        started = time.monotonic()
        wait_set(stop)
        assert time.monotonic() - started < 3.0
    finally:
        watchdog.cancel()
        signal.signal(signal.SIGUSR1, previous)
