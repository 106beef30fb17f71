"""An in-process fan-out "bridge process" for integration tests: hub, feed, LISTEN connection and the
`/v1/ws` endpoint on a real socket, against a real PostgreSQL; events are written with the real writer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from aiohttp import web
from aiohttp.test_utils import TestServer
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from bridge.events import ChatEvent
from bridge.fanout.connection import WebSocketContext
from bridge.fanout.feed import CommitListener, DurableFeed
from bridge.fanout.hub import Hub
from bridge.fanout.queue import QueueLimits
from bridge.http.ws import add_websocket
from bridge.store.reads import FanoutStore
from bridge.store.writes import EventStore
from tests.support.chat_events import chat_event
from tests.support.waiting import wait_until

SECRET = "s" * 48
UPSTREAM = "it-upstream"


class Node:
    def __init__(self, engine: AsyncEngine, database_url: str, *, limits: QueueLimits | None = None,
                 allowed_origins: frozenset[str] = frozenset(),
                 confirm: Callable[[str], Awaitable[bool]] | None = None,
                 read_engine: AsyncEngine | None = None, read_slots: int = 3) -> None:
        self.engine = engine
        self.hub = Hub(wake=lambda sid: self.feed.wake(sid))
        self.store = FanoutStore(engine, UPSTREAM, read_engine)
        self.feed = DurableFeed(self.hub, self.store)
        self.listener = CommitListener(database_url, UPSTREAM, self.feed.committed, self.feed.wake_all,
                                       on_status=self.feed.status)
        self.warmed: list[str] = []
        self.service = WebSocketContext(hub=self.hub, store=self.store, upstream=UPSTREAM, secret=SECRET,
                                     allowed_origins=allowed_origins,
                                     limits=limits or QueueLimits(), warm=self.warmed.append, confirm=confirm,
                                     read_slots=read_slots)
        self.writer = EventStore(engine, UPSTREAM)
        self._epochs: dict[str, int] = {}
        self._server: TestServer | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def url(self) -> str:
        assert self._server is not None
        return str(self._server.make_url("")).rstrip("/")

    def token(self, sessions: Sequence[str] | None = None, ttl: float = 600) -> str:
        return mint_token(SECRET, UPSTREAM, sessions, ttl)

    async def start(self) -> None:
        app = web.Application()
        add_websocket(app, self.service)
        self._server = TestServer(app, host="127.0.0.1")
        await self._server.start_server()
        self._tasks = [asyncio.create_task(self.feed.run()), asyncio.create_task(self.listener.run())]
        await wait_until(self.listener.connected.is_set, 20, 0.02, message="LISTEN connected")

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.close()
        for t in self._tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t

    async def write(self, session_id: str, events: Sequence[ChatEvent]) -> None:
        """Commit a batch as the session's writer; the feed hears of it through NOTIFY, as in the bridge."""
        if session_id not in self._epochs:
            self._epochs[session_id] = (await self.writer.claim(session_id, f"owner-{id(self)}"))[0]
        await self.writer.write_batch(session_id, self._epochs[session_id], events, datetime.now(UTC))

    async def write_seqs(self, session_id: str, *seqs: int, text_size: int = 0) -> None:
        data = {"text": "x" * text_size} if text_size else None
        await self.write(session_id, [chat_event(s, session_id=session_id, data=data) for s in seqs])
