"""The session list the viewer reads: directory, last activity and the number of stored events."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.reads import AuditReader, SessionFilter
from bridge.store.writes import EventStore

from .test_audit_store import captured, mirror


async def test_sessions_carry_their_event_count_directory_and_last_activity(
    engine: AsyncEngine, store: EventStore
) -> None:
    text_turn = await mirror(store, "a-text-turn")
    tool_turn = await mirror(store, "b-tool-turn")
    await store.claim("ses_empty", "owner-1", "/elsewhere")  # known, nothing stored yet
    reader = AuditReader(engine, store.upstream)
    rows = {r["session_id"]: r for r in await reader.sessions(SessionFilter())}
    assert rows[text_turn]["event_count"] == len(captured("a-text-turn"))
    assert rows[tool_turn]["event_count"] == len(captured("b-tool-turn")) == 30
    assert rows["ses_empty"]["event_count"] == 0
    assert rows[text_turn]["directory"] == "/work/dir" and rows[text_turn]["last_event_at"] is not None
    one = await reader.session(tool_turn)
    assert one is not None and one["event_count"] == 30
    other_upstream = AuditReader(engine, "another-upstream")
    assert await other_upstream.sessions(SessionFilter()) == []
