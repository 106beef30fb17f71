"""What the mirror stored, read back the way a test compares it with the upstream (plain SQL on the rows)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.writes import EventStore
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from tests.support.opencode import OpencodeServe


async def stored_ids(store: EventStore, session_id: str) -> list[tuple[int, str]]:
    """(seq, event_id) of every stored event of the session, in seq order."""
    async with store.engine.connect() as conn:
        rows = await conn.execute(text("select seq, event_id from chat_session_events "
                                       "where upstream = :u and session_id = :s order by seq"),
                                  {"u": store.upstream, "s": session_id})
        return [(int(seq), str(event_id)) for seq, event_id in rows]


async def wait_synced(db: AsyncEngine, serve: OpencodeServe, upstream: str, *sessions: str,
                      timeout: float = 60) -> None:
    """Every session's stored (seq, event_id) list equals its sync log from seq 0 (`session.created`
    included), in order, no extras."""
    store = EventStore(db, upstream)
    state: dict[str, Any] = {}

    async def same() -> bool:
        for sid in sessions:
            stored = await stored_ids(store, sid)
            log = [(int(i["seq"]), str(i["id"])) for i in await serve.sync_log(sid)]
            state[sid] = (stored[:1], len(stored), len(log))
            if stored != log or not log or log[0][0] != 0:
                return False
        return True

    await wait_until(same, timeout, 0.2,
                     message=f"stored == /sync/history for {sessions} (first, stored, log): {state}")
