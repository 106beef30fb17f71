"""The listening socket of `serving` (bridge.http.app) takes a reconnect storm's connections while the process
is busy: aiohttp's sites default to a backlog of 128, applied to an inherited socket too, beyond which the
kernel drops SYNs and the client waits for their retransmission (1, 3, 7 … s)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from aiohttp import web

from bridge.http.app import serving
from bridge.http.server import LISTEN_BACKLOG

STORM = 300  # more than aiohttp's default backlog (128), fewer than LISTEN_BACKLOG
SOMAXCONN = int(Path("/proc/sys/net/core/somaxconn").read_text())  # the kernel's cap on every backlog


def _connects_while_nobody_accepts(port: int) -> int:
    """Called without awaiting: the loop that would accept is blocked meanwhile. How many of STORM
    connects the kernel completed within 2 s each (a dropped SYN is retried only after 1 s, then 3)."""
    opened: list[socket.socket] = []
    done = 0
    try:
        for _ in range(STORM):
            s = socket.socket()
            s.settimeout(2.0)
            opened.append(s)
            try:
                s.connect(("127.0.0.1", port))
                done += 1
            except OSError:
                break
    finally:
        for s in opened:
            s.close()
    return done


@pytest.mark.parametrize("inherited", [False, True])
async def test_a_storm_of_connects_is_queued_while_the_process_is_busy(inherited: bool) -> None:
    assert LISTEN_BACKLOG > STORM
    assert SOMAXCONN > STORM, f"net.core.somaxconn is {SOMAXCONN}: every backlog is capped below a storm"
    sockets: list[socket.socket] = []
    if inherited:  # a worker's socket, bound and listening already (bridge.workers.parent)
        sock = socket.create_server(("127.0.0.1", 0), backlog=LISTEN_BACKLOG)
        sockets.append(sock)
    async with serving(web.Application(), "127.0.0.1", 0, max_connections=1000, sockets=sockets) as runner:
        port = int(runner.addresses[0][1])
        t0 = time.monotonic()
        assert _connects_while_nobody_accepts(port) == STORM
        assert time.monotonic() - t0 < 10  # none waited for a SYN retransmission's 2 s timeout
