"""The audit (docs/audit.md): the per-session hash chain set at write time, and `AuditReader`, the read-only
audit queries (API, CLI, export) of `bridge.store.reads.queries` executed for one upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

import bridge.store.reads.queries as reads
from bridge.auth import Claims
from bridge.store.chat_sessions import reader, tree
from bridge.store.codecs import audit_session, row_dict, session_row
from bridge.store.commands_pending.pending import PendingStore
from bridge.store.hash_chain import ChainRow
from bridge.store.reads.queries import SessionFilter, ToolCallFilter

# --- reads ------------------------------------------------------------------------------------------


class AuditReader:
    """Read-only queries of one upstream's mirror."""

    def __init__(self, engine: AsyncEngine, upstream: str) -> None:
        self._engine = engine
        self.upstream = upstream

    async def sessions(self, f: SessionFilter) -> list[dict[str, Any]]:
        async with self._engine.connect() as conn:
            rows = await conn.execute(reads.select_sessions_page(self.upstream, f))
            return [audit_session(session_row(r)) for r in rows]

    def pending_store(self) -> PendingStore:
        """The pending-requests table (questions and who answered them) on the same read pool."""
        return PendingStore(self._engine, self.upstream)

    async def session(self, session_id: str) -> dict[str, Any] | None:
        async with self._engine.connect() as conn:
            row = await reader.read_session(conn, self.upstream, session_id, event_count=True)
            parent = None if row is None else await tree.parent_of(conn, self.upstream, session_id)
        return None if row is None else {**audit_session(row), "parent_id": parent}

    async def children(self, session_id: str) -> list[str]:
        """The sessions a subagent of `session_id` runs in (bridge.store.chat_sessions.tree)."""
        async with self._engine.connect() as conn:
            return await tree.children(conn, self.upstream, session_id)

    async def widen(self, claims: Claims, session_id: str) -> Claims:
        """A session-limited token also grants the descendants of its sessions (bridge.store.chat_sessions.tree)."""
        return await tree.widen(claims, self._engine, self.upstream, session_id)

    async def events(self, session_id: str, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        async with self._engine.connect() as conn:
            rows = await conn.execute(reads.select_events_page(self.upstream, session_id, after, limit))
            return [row_dict(r) for r in rows]

    async def all_events(self, session_id: str, page: int = 1000) -> AsyncIterator[dict[str, Any]]:
        after = -1  # seq 0 (`session.created`) included
        while True:
            rows = await self.events(session_id, after, page)
            for r in rows:
                yield r
            if len(rows) < page:
                return
            after = int(rows[-1]["seq"])

    async def transcript_rows(self, session_id: str, after: int, limit: int,
                              page: int = 200) -> AsyncIterator[dict[str, Any]]:
        """`seq`, `kind`, `payload`, `asked_by` of at most `limit` events after `after`, in seq order, read
        `page` rows at a time (one short statement each: no connection is held between pages)."""
        left = limit
        while left > 0:
            stmt = reads.select_transcript_page(self.upstream, session_id, after, min(page, left))
            async with self._engine.connect() as conn:
                rows = [row_dict(r) for r in await conn.execute(stmt)]
            for r in rows:
                yield r
            if len(rows) < min(page, left):
                return
            left -= len(rows)
            after = int(rows[-1]["seq"])

    async def count_events(self, session_id: str) -> int:
        async with self._engine.connect() as conn:
            return int((await conn.execute(reads.select_event_count(self.upstream, session_id))).scalar_one())

    async def chain_rows(self, session_id: str) -> list[ChainRow]:
        async with self._engine.connect() as conn:
            rows = await conn.execute(reads.select_chain_rows(self.upstream, session_id))
            return [ChainRow(int(r.seq), str(r.event_id), str(r.payload_text), r.chain_hash) for r in rows]

    async def session_ids(self) -> list[str]:
        async with self._engine.connect() as conn:
            return [str(r) for r in (await conn.execute(reads.select_session_ids(self.upstream))).scalars()]

    async def tool_calls(self, f: ToolCallFilter) -> list[dict[str, Any]]:
        stmt, params = reads.select_tool_calls(self.upstream, f)
        async with self._engine.connect() as conn:
            return [row_dict(r) for r in await conn.execute(stmt, params)]
