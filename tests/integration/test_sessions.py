"""Session rows: tombstones, status, listing; rejected frames are kept with their reason."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.chat_sessions import LeaseStore
from bridge.store.payload import REPLACEMENT
from bridge.store.schema import chat_event_rejects
from bridge.store.writes import EventStore
from tests.support.chat_events import RECEIVED_AT, SESSION, batch
from tests.support.stored_rows import stored_ids


async def _rejects(engine: AsyncEngine) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        result = await conn.execute(select(chat_event_rejects).order_by(chat_event_rejects.c.id))
        return [dict(r._mapping) for r in result]


async def test_mark_deleted_keeps_history_and_hides_the_session_from_the_default_listing(
    store: EventStore,
) -> None:
    epoch, _ = await store.claim(SESSION, "owner-1")
    await store.claim("ses_alive", "owner-1")
    await store.write_batch(SESSION, epoch, batch(1, 2), RECEIVED_AT)

    await store.mark_deleted(SESSION)

    session = await store.get_session(SESSION)
    assert session is not None
    assert (session.deleted, session.status, session.cursor_seq) == (True, "deleted", 2)
    assert session.deleted_at is not None
    assert [s.session_id for s in await store.sessions()] == ["ses_alive"]
    assert [s.session_id for s in await store.sessions(include_deleted=True)] == [SESSION, "ses_alive"]
    assert len(await stored_ids(store, SESSION)) == 2


async def test_mark_deleted_twice_keeps_the_first_deletion_time(store: EventStore) -> None:
    await store.claim(SESSION, "owner-1")
    await store.mark_deleted(SESSION)
    first = await store.get_session(SESSION)

    await store.mark_deleted(SESSION)

    again = await store.get_session(SESSION)
    assert first is not None and again is not None and again.deleted_at == first.deleted_at


async def test_mark_deleted_of_an_unknown_session_leaves_a_tombstone(store: EventStore) -> None:
    await store.mark_deleted("ses_never_seen")

    session = await store.get_session("ses_never_seen")
    assert session is not None and session.deleted and session.lease_owner is None


async def test_get_session_of_an_unknown_session_is_none(store: EventStore) -> None:
    assert await store.get_session("ses_nope") is None
    assert await store.sessions() == []


async def test_set_status_records_status_and_reason(store: EventStore, engine: AsyncEngine) -> None:
    await store.claim(SESSION, "owner-1")

    assert await LeaseStore(engine, store.upstream).set_status(SESSION, "owner-1", "stalled",
                                                               "no event 60 s after prompt admitted")

    session = await store.get_session(SESSION)
    assert session is not None
    assert (session.status, session.status_reason) == ("stalled", "no event 60 s after prompt admitted")


async def test_reject_frame_keeps_the_frame_text_and_reason(store: EventStore, engine: AsyncEngine) -> None:
    await store.reject_frame(SESSION, "bad_json", '{"id": "evt_x", ', RECEIVED_AT, seq=4, detail="EOF")

    [reject] = await _rejects(engine)
    assert (reject["upstream"], reject["session_id"], reject["seq"]) == (store.upstream, SESSION, 4)
    assert (reject["reason"], reject["detail"], reject["raw"]) == ("bad_json", "EOF", '{"id": "evt_x", ')
    assert reject["received_at"] == RECEIVED_AT and reject["created_at"] is not None


async def test_reject_frame_without_session_is_kept(store: EventStore, engine: AsyncEngine) -> None:
    await store.reject_frame(None, "not_an_object", "[1, 2]", RECEIVED_AT)

    [reject] = await _rejects(engine)
    assert (reject["session_id"], reject["seq"], reject["raw"]) == (None, None, "[1, 2]")


async def test_reject_frame_with_a_nul_keeps_it_json_encoded(store: EventStore, engine: AsyncEngine) -> None:
    frame = "bad\x00frame"

    await store.reject_frame(SESSION, "bad_json", frame, RECEIVED_AT)

    [reject] = await _rejects(engine)
    assert reject["raw"] == '"bad\\u0000frame"'
    assert REPLACEMENT not in reject["raw"]
    assert "JSON-encoded" in reject["detail"]
