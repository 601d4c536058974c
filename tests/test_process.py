"""Free ports for the test infrastructure's servers."""

from __future__ import annotations

import socket
from pathlib import Path

from harness.process import free_port


def test_free_ports_are_below_the_ephemeral_range_and_never_handed_out_twice() -> None:
    """bind(0) and every outgoing connection draw ports from the ephemeral range, so a port
    handed out from there could be taken before its server binds it."""
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(port < ephemeral_low for port in ports)
    for port in ports[:20]:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))
