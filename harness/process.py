"""Processes of the local test infrastructure: free ports, readiness waits, clean stops.

Each process runs in its own session so that stopping it also stops anything it started, and a
failing test never leaves a server behind.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import requests
from kubernetes import client


def peak_rss_mib(pid: int | str = "self") -> float:
    """VmHWM: the most resident memory the process ever had, in MiB. Not getrusage's ru_maxrss,
    which Linux carries across exec: a child started by a parent that once held 800 MiB
    reported 813 MiB there, and 13 MiB here."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


_HANDED_OUT: set[int] = set()
_CHANCE = random.Random()  # its own: a test that seeds the module's generator must not pick ports
_LOWEST_PORT = 10000


def free_port() -> int:
    """A loopback port free now, below the kernel's ephemeral range, and never handed out twice
    by this process. A port from bind(0) is in that range, from which every outgoing connection
    also draws its source port: in CI the controller's webhook port was taken between handing
    it out and the controller binding it (Address already in use)."""
    highest = _first_ephemeral_port() - 1
    if highest < _LOWEST_PORT:
        raise RuntimeError(f"free_port: the kernel's ephemeral ports start below {_LOWEST_PORT}")
    while True:
        port = _CHANCE.randint(_LOWEST_PORT, highest)
        if port in _HANDED_OUT:
            continue
        _HANDED_OUT.add(port)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken by someone else: try another
        return port


def _first_ephemeral_port() -> int:
    """Where the kernel's range for source ports and bind(0) starts; Linux's default where it
    cannot be read."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `check` until it is true; connection errors and missing fields count as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except (requests.RequestException, OSError, KeyError, ValueError, client.ApiException):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout:g}s")
        time.sleep(0.2)


@dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, characters: int = 2000) -> str:
        return self.log_path.read_text(errors="replace")[-characters:]

    def stop(self, grace: float = 10) -> None:
        if self.alive():
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


def spawn(name: str, argv: list[str], log_path: Path) -> Component:
    log = log_path.open("ab")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return Component(name, process, log, log_path)


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """Within the block, SIGTERM unwinds like Ctrl-C, so the `finally` clauses that stop our
    servers run. Python's default for SIGTERM ends the process on the spot, and the servers,
    each in its own session, lived on: `make soak` under a CI timeout left seven processes.
    The first signal wins; later ones are ignored until the block ends, so a second Ctrl-C
    cannot cut the clean-up short. Outside the main thread signals cannot be handled: no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}

    def interrupt(number: int, _frame: object) -> None:
        for each in previous:
            signal.signal(each, signal.SIG_IGN)
        raise KeyboardInterrupt(signal.Signals(number).name)

    for number in previous:
        signal.signal(number, interrupt)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
