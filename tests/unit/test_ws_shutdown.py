"""`/v1/ws` at shutdown (bridge.http.ws): every open socket is told 1001 at once, and a close that never
completes (a client gone with a full send buffer) is given up after GOING_AWAY_TIMEOUT_S."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from bridge.fanout import protocol as p
from bridge.http import ws
from tests.support.waiting import wait_until


class _Socket:
    """A socket whose close completes only when `done` is set (or never)."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self.done = asyncio.Event()
        self.finished = False
        self.cancelled = False

    async def close(self, *, code: int, message: bytes) -> bool:
        self.codes.append(code)
        try:
            await self.done.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished = True
        return True


class _Sweep:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _app(sockets: list[_Socket]) -> web.Application:
    app = web.Application()
    app[ws._SOCKETS_KEY] = set(sockets)  # type: ignore[arg-type]
    app[ws._SWEEP_KEY] = _Sweep()  # type: ignore[assignment]
    return app


async def test_every_socket_is_told_1001_before_any_close_completes() -> None:
    sockets = [_Socket() for _ in range(5)]
    shutdown = asyncio.create_task(ws._shutdown(_app(sockets)))
    # One after the other, the second close would start only once the first completed: never, here.
    await wait_until(lambda: all(s.codes for s in sockets), timeout=5, message="a close waited for another")
    assert [s.codes for s in sockets] == [[p.CLOSE_GOING_AWAY]] * 5
    assert not any(s.finished for s in sockets)
    for s in sockets:
        s.done.set()
    await asyncio.wait_for(shutdown, timeout=5)
    assert all(s.finished for s in sockets)


async def test_a_close_that_never_completes_is_given_up_and_the_others_are_not_held(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ws, "GOING_AWAY_TIMEOUT_S", 0.05)
    stuck, fine = _Socket(), _Socket()
    fine.done.set()
    app: Any = _app([stuck, fine])
    await asyncio.wait_for(ws._shutdown(app), timeout=5)
    assert stuck.cancelled and not stuck.finished  # the cancelled close drops the connection (aiohttp)
    assert fine.finished and fine.codes == [p.CLOSE_GOING_AWAY]
    assert app[ws._SWEEP_KEY].closed
