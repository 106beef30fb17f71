"""What the mirror stored, read back the way a test compares it with the upstream (plain SQL on the rows)."""

from __future__ import annotations

from sqlalchemy import text

from bridge.store.writes import EventStore


async def stored_ids(store: EventStore, session_id: str) -> list[tuple[int, str]]:
    """(seq, event_id) of every stored event of the session, in seq order."""
    async with store.engine.connect() as conn:
        rows = await conn.execute(text("select seq, event_id from chat_session_events "
                                       "where upstream = :u and session_id = :s order by seq"),
                                  {"u": store.upstream, "s": session_id})
        return [(int(seq), str(event_id)) for seq, event_id in rows]
