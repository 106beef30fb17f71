"""A skipped insert is either the same event again (benign) or a conflict: kept aside, logged, counted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from bridge.store.schema import chat_event_rejects, chat_session_events
from bridge.store.writes import BatchResult, EventStore
from tests.support.chat_events import RECEIVED_AT, SESSION, batch, chat_event, event_id
from tests.support.stored_rows import stored_ids

pytestmark = pytest.mark.usefixtures("write_path")  # both ways rows go in (conftest)


async def _rejects(engine: AsyncEngine) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        result = await conn.execute(select(chat_event_rejects).order_by(chat_event_rejects.c.id))
        return [dict(r._mapping) for r in result]


async def _payload_at(engine: AsyncEngine, seq: int) -> Any:
    async with engine.connect() as conn:
        stmt = select(chat_session_events.c.payload).where(chat_session_events.c.seq == seq)
        return (await conn.execute(stmt)).scalar_one()


async def _stored_first(store: EventStore) -> int:
    epoch, _ = await store.claim(SESSION, "owner-1")
    await store.write_batch(SESSION, epoch, batch(1, 2, 3), RECEIVED_AT)
    return epoch


async def test_same_seq_with_another_event_id_is_rejected_and_the_original_kept(
    store: EventStore, engine: AsyncEngine
) -> None:
    epoch = await _stored_first(store)
    impostor = chat_event(2, id_="evt_impostor")

    with capture_logs() as logs:
        result = await store.write_batch(SESSION, epoch, [impostor], RECEIVED_AT)

    assert result == BatchResult(inserted=0, duplicates=0, rejected=1, cursor_seq=3)
    assert (2, event_id(2)) in await stored_ids(store, SESSION)
    [reject] = await _rejects(engine)
    assert (reject["reason"], reject["session_id"], reject["seq"], reject["event_id"]) == (
        "conflicting_duplicate",
        SESSION,
        2,
        "evt_impostor",
    )
    assert json.loads(reject["raw"]) == impostor.envelope.raw
    detail = json.loads(reject["detail"])
    assert detail["incoming"] == {"seq": 2, "event_id": "evt_impostor"}
    assert detail["stored"] == [
        {"session_id": SESSION, "seq": 2, "event_id": event_id(2), "same_payload": False}
    ]
    [entry] = [e for e in logs if e["event"] == "conflicting_duplicate"]
    assert entry["log_level"] == "error"
    assert (entry["upstream"], entry["session_id"], entry["seq"], entry["event_id"]) == (
        store.upstream,
        SESSION,
        2,
        "evt_impostor",
    )


async def test_same_seq_and_id_with_another_payload_is_rejected_and_the_original_kept(
    store: EventStore, engine: AsyncEngine
) -> None:
    epoch = await _stored_first(store)
    original = await _payload_at(engine, 3)
    altered = chat_event(3, data={"text": "rewritten"})

    with capture_logs() as logs:
        result = await store.write_batch(SESSION, epoch, [altered], RECEIVED_AT)

    assert result.rejected == 1 and result.duplicates == 0
    assert await _payload_at(engine, 3) == original
    [reject] = await _rejects(engine)
    assert reject["reason"] == "conflicting_duplicate"
    assert json.loads(reject["raw"]) == altered.envelope.raw
    assert json.loads(reject["detail"])["stored"][0]["same_payload"] is False
    assert [e["seq"] for e in logs if e["event"] == "conflicting_duplicate"] == [3]


async def test_a_known_event_id_at_another_seq_is_rejected_and_the_cursor_passes_it(
    store: EventStore, engine: AsyncEngine
) -> None:
    epoch = await _stored_first(store)
    moved = chat_event(4, id_=event_id(1))

    result = await store.write_batch(SESSION, epoch, [moved, *batch(5)], RECEIVED_AT)

    # The newcomer is kept in rejects, so the cursor passing seq 4 loses nothing.
    assert result == BatchResult(inserted=1, duplicates=0, rejected=1, cursor_seq=5)
    assert [s for s, _ in await stored_ids(store, SESSION)] == [1, 2, 3, 5]
    [reject] = await _rejects(engine)
    assert (reject["seq"], reject["event_id"]) == (4, event_id(1))
    assert json.loads(reject["detail"])["stored"] == [
        {"session_id": SESSION, "seq": 1, "event_id": event_id(1), "same_payload": False}
    ]


async def test_two_events_with_one_seq_in_one_batch_keep_the_first(
    store: EventStore, engine: AsyncEngine
) -> None:
    epoch, _ = await store.claim(SESSION, "owner-1")
    first, second = chat_event(1), chat_event(1, id_="evt_second")

    result = await store.write_batch(SESSION, epoch, [first, second], RECEIVED_AT)

    assert result == BatchResult(inserted=1, duplicates=0, rejected=1, cursor_seq=1)
    assert await stored_ids(store, SESSION) == [(1, event_id(1))]
    assert [r["event_id"] for r in await _rejects(engine)] == ["evt_second"]


async def test_an_identical_replay_logs_nothing(store: EventStore) -> None:
    epoch = await _stored_first(store)

    with capture_logs() as logs:
        result = await store.write_batch(SESSION, epoch, batch(1, 2, 3), RECEIVED_AT)

    assert result.duplicates == 3
    assert logs == []
