"""The two backends of every store port's contract suite (docs/ports.md): the real embedded PostgreSQL
(tests/conftest.py's migrated database) and the in-memory twin (bridge.store.memory). A suite asks the
`backend` fixture for the port it tests and sets the scene through the `Backend`'s few set-up calls, each
done the backend's own way (SQL, or the twin's tables), so that the same test function runs on both.

Import the fixture into a test module: `from tests.support.store_ports import Backend, backend`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.events import Kind
from bridge.store.chat_sessions import LeaseStore
from bridge.store.commands_pending import CommandStore, PendingStore, PromptQueueStore
from bridge.store.db import make_engine
from bridge.store.memory import (
    MemoryCommandStore,
    MemoryEvent,
    MemoryLeases,
    MemoryPendingStore,
    MemoryPromptQueue,
    MemoryStatus,
    MemoryTables,
)
from bridge.store.ports import (
    CommandKey,
    CommandRowsPort,
    LeasePort,
    PendingRequestsPort,
    PromptQueuePort,
    SessionStatusPort,
)
from bridge.store.reads import FanoutStore
from bridge.store.writes import EventStore
from tests.support.chat_events import RECEIVED_AT, chat_event

UPSTREAM = "port-upstream"

# The columns of a session row a contract test may look at, as the backends give them.
ROW_COLUMNS = ("directory", "cursor_seq", "status", "status_reason", "title", "deleted", "incomplete",
               "lease_owner", "lease_epoch")


@dataclass(frozen=True)
class Event:
    """A stored event as a suite seeds it: its seq, kind, upstream type and message id."""

    seq: int
    kind: str
    type: str = "session.next.text.ended"
    message_id: str | None = None


@dataclass
class Backend:
    name: str
    tables: MemoryTables | None = None
    engine: AsyncEngine | None = None
    upstream: str = UPSTREAM  # PostgreSQL: the upstream column keeps backends in one database apart

    @property
    def pg(self) -> AsyncEngine:
        assert self.engine is not None
        return self.engine

    @property
    def mem(self) -> MemoryTables:
        assert self.tables is not None
        return self.tables

    # --- the ports --------------------------------------------------------------------------------------

    def leases(self) -> LeasePort:
        return MemoryLeases(self.tables) if self.tables is not None else LeaseStore(self.pg, self.upstream)

    def status(self) -> SessionStatusPort:
        return MemoryStatus(self.tables) if self.tables is not None else LeaseStore(self.pg, self.upstream)

    def commands(self) -> CommandRowsPort:
        if self.tables is not None:
            return MemoryCommandStore(self.tables, self.upstream)
        return CommandStore(self.pg, self.upstream)

    def queue(self) -> PromptQueuePort:
        return MemoryPromptQueue(self.tables) if self.tables is not None else PromptQueueStore(self.pg, self.upstream)

    def pending(self) -> PendingRequestsPort:
        if self.tables is not None:
            return MemoryPendingStore(self.tables, self.upstream)
        return PendingStore(self.pg, self.upstream)

    # --- set-up, each backend its own way ---------------------------------------------------------------

    async def store_events(self, session_id: str, epoch: int, events: list[Event]) -> None:
        """A committed batch of the lease holder (the write transaction on PostgreSQL)."""
        if self.tables is not None:
            self.mem.store_events(session_id, epoch, [MemoryEvent(e.seq, e.kind, e.type, e.message_id)
                                                      for e in events])
            return
        batch = [chat_event(e.seq, session_id=session_id, type_=e.type, kind=Kind(e.kind), message_id=e.message_id)
                 for e in events]
        await EventStore(self.pg, self.upstream).write_batch(session_id, epoch, batch, RECEIVED_AT)

    async def expire_lease(self, session_id: str) -> None:
        """The session's lease ran out a second ago (by the backend's clock)."""
        if self.tables is not None:
            row = self.mem.sessions.get(session_id)
            if row is not None:
                row.lease_expires_at = self.mem.clock() - timedelta(seconds=1)
            return
        await self._sql("UPDATE chat_sessions SET lease_expires_at = now() - interval '1 second'"
                        " WHERE upstream = :u AND session_id = :s", s=session_id)

    async def age_send_claim(self, key: CommandKey, seconds: float) -> None:
        """The prompt row's send claim was taken `seconds` earlier than it was."""
        if self.tables is not None:
            row = self.mem.commands.get(key)
            if row is not None and row["send_claimed_at"] is not None:
                row["send_claimed_at"] -= timedelta(seconds=seconds)
            return
        await self._sql("UPDATE chat_commands SET send_claimed_at = send_claimed_at - make_interval(secs => :n)"
                        " WHERE upstream = :u AND subject = :sub AND target_session = :t AND command_id = :c",
                        n=seconds, sub=key.subject, t=key.target_session, c=key.command_id)

    async def permission(self, session_id: str, request_id: str, *, asked_at: datetime | None = None,
                         reply: str | None = None, runtime: str = "v2") -> None:
        """A permission request as the fan-out records it: asked (and replied, when `reply` is given)."""
        envelope = {"type": "permission.v2.asked", "data": {"id": request_id}}
        await self._fanout().permission_asked(session_id, request_id, envelope, asked_at or datetime.now(UTC), "bash",
                                              None, None, runtime)
        if reply is not None:
            await self.permission_replied(session_id, request_id, reply)

    async def permission_replied(self, session_id: str, request_id: str, reply: str | None) -> None:
        """A permission request's reply as the fan-out records it (`None`: an unknown reply)."""
        envelope = {"type": "permission.v2.replied", "data": {"requestID": request_id}}
        await self._fanout().permission_replied(session_id, request_id, envelope, datetime.now(UTC), reply)

    def _fanout(self) -> Any:
        """What records permission requests: the fan-out's store, or the pending requests' twin."""
        return FanoutStore(self.pg, self.upstream) if self.tables is None else MemoryPendingStore(self.tables)

    # --- reading back -----------------------------------------------------------------------------------

    async def row(self, session_id: str) -> dict[str, Any] | None:
        """The session row's ROW_COLUMNS (None: no row)."""
        if self.tables is not None:
            r = self.mem.sessions.get(session_id)
            return None if r is None else {c: getattr(r, c) for c in ROW_COLUMNS}
        async with self.pg.connect() as conn:
            got = (await conn.execute(text(f"SELECT {', '.join(ROW_COLUMNS)} FROM chat_sessions"
                                           " WHERE upstream = :u AND session_id = :s"),
                                      {"u": self.upstream, "s": session_id})).mappings().first()
        return None if got is None else dict(got)

    async def command(self, key: CommandKey) -> dict[str, Any] | None:
        """The command row's columns the bridge writes (None: no row)."""
        cols = ("state", "upstream_id", "http_status", "result", "runtime", "send_token", "upstream_status",
                "admitted_seq")
        if self.tables is not None:
            r = self.mem.commands.get(key)
            return None if r is None else {c: r[c] for c in cols}
        async with self.pg.connect() as conn:
            got = (await conn.execute(text(f"SELECT {', '.join(cols)} FROM chat_commands WHERE upstream = :u"
                                           " AND subject = :sub AND target_session = :t AND command_id = :c"),
                                      {"u": self.upstream, "sub": key.subject, "t": key.target_session,
                                       "c": key.command_id})).mappings().first()
        return None if got is None else dict(got)

    async def _sql(self, statement: str, **params: Any) -> None:
        async with self.pg.begin() as conn:
            await conn.execute(text(statement), {"u": self.upstream, **params})


@pytest.fixture(params=["postgres", "memory"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """Each contract test twice: on a fresh migrated PostgreSQL database, and on fresh in-memory tables."""
    if request.param == "memory":
        yield Backend("memory", tables=MemoryTables())
        return
    engine = make_engine(request.getfixturevalue("database_url"))
    try:
        yield Backend("postgres", engine=engine)
    finally:
        await engine.dispose()
