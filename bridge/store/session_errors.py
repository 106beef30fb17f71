"""SQL of the session-level errors (`chat_session_errors`, migration 0015; docs/audit.md "Session errors"):
`session.error` is live only upstream (docs/upstream.md §20), so the bridge records each one it relays.
Every replica reads the live stream: the event id keys the row, the first writer wins."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.schema import chat_session_errors

R = chat_session_errors.c
MAX_LIST = 500


class SessionErrorStore:
    def __init__(self, engine: AsyncEngine, upstream: str, read_engine: AsyncEngine | None = None) -> None:
        self._engine = engine
        self._read = read_engine or engine
        self.upstream = upstream

    async def record(self, session_id: str, event_id: str, error_type: str | None, error_message: str | None,
                     payload: dict[str, Any], received_at: datetime) -> None:
        stmt = pg_insert(chat_session_errors).values(
            upstream=self.upstream, event_id=event_id, session_id=session_id, error_type=error_type,
            error_message=error_message, payload=payload, received_at=received_at).on_conflict_do_nothing()
        async with self._engine.begin() as conn:
            await conn.execute(stmt)

    async def for_session(self, session_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """The session's errors, newest first."""
        q = (select(R.event_id, R.error_type, R.error_message, R.received_at)
             .where(and_(R.upstream == self.upstream, R.session_id == session_id))
             .order_by(R.received_at.desc(), R.event_id.desc()).limit(min(limit, MAX_LIST)))
        async with self._read.connect() as conn:
            return [dict(r) for r in (await conn.execute(q)).mappings().all()]
