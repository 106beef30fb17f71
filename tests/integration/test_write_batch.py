"""write_batch: events and cursor move together, idempotently, and the cursor only moves forward."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.schema import chat_event_rejects, chat_session_events
from bridge.store.writes import BatchResult, EventStore
from tests.support.chat_events import BASE_MS, RECEIVED_AT, SESSION, batch, chat_event, event_id, ms_to_datetime
from tests.support.stored_rows import stored_ids

pytestmark = pytest.mark.usefixtures("write_path")  # both ways rows go in (conftest)


async def _claimed(store: EventStore, session_id: str = SESSION) -> int:
    epoch, _ = await store.claim(session_id, "owner-1", "/work/dir")
    return epoch


async def _rows(engine: AsyncEngine) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        result = await conn.execute(select(chat_session_events).order_by(chat_session_events.c.seq))
        return [dict(r._mapping) for r in result]


async def _reject_count(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(chat_event_rejects))).scalar_one())


async def test_first_batch_stores_every_event_and_moves_the_cursor(store: EventStore) -> None:
    epoch = await _claimed(store)

    result = await store.write_batch(SESSION, epoch, batch(1, 2, 3), RECEIVED_AT)

    assert result == BatchResult(inserted=3, duplicates=0, rejected=0, cursor_seq=3)
    assert await stored_ids(store, SESSION) == [(s, event_id(s)) for s in (1, 2, 3)]
    session = await store.get_session(SESSION)
    assert session is not None and session.cursor_seq == 3


async def test_rows_hold_the_envelope_as_received_and_the_normalized_columns(
    store: EventStore, engine: AsyncEngine
) -> None:
    epoch = await _claimed(store)
    event = chat_event(
        7,
        type_="session.next.step.ended",
        kind="step:end",
        data={"finish": "stop", "cost": 0.0125, "nested": {"k": [1, 2.5, None, True]}},
        assistant_message_id="msg_a",
        finish="stop",
        tokens_input=1200,
        tokens_output=34,
        tokens_reasoning=0,
        tokens_cache_read=2**40,
        tokens_cache_write=5,
        cost=0.0125,
        agent="build",
        model_id="m",
        provider_id="p",
    )

    await store.write_batch(SESSION, epoch, [event], RECEIVED_AT)

    [row] = await _rows(engine)
    assert row["payload"] == event.envelope.raw
    assert row["payload_lossy"] is False
    assert (row["upstream"], row["session_id"], row["seq"], row["event_id"]) == (
        store.upstream,
        SESSION,
        7,
        event.event_id,
    )
    assert (row["type"], row["kind"], row["schema_version"]) == ("session.next.step.ended", "step:end", 1)
    assert row["event_time"] == ms_to_datetime(BASE_MS + 7)
    assert row["received_at"] == RECEIVED_AT
    assert row["stored_at"] is not None
    assert (row["assistant_message_id"], row["finish"], row["agent"]) == ("msg_a", "stop", "build")
    assert (row["tokens_input"], row["tokens_output"], row["tokens_cache_read"]) == (1200, 34, 2**40)
    assert (row["cost"], row["model_id"], row["provider_id"]) == (0.0125, "m", "p")
    assert row["tool_name"] is None and row["error_type"] is None


async def test_same_batch_twice_is_all_duplicates_and_changes_nothing(
    store: EventStore, engine: AsyncEngine
) -> None:
    epoch = await _claimed(store)
    events = batch(1, 2, 3)
    await store.write_batch(SESSION, epoch, events, RECEIVED_AT)
    rows_before = await _rows(engine)

    again = await store.write_batch(SESSION, epoch, events, RECEIVED_AT)

    assert again == BatchResult(inserted=0, duplicates=3, rejected=0, cursor_seq=3)
    assert await _rows(engine) == rows_before
    assert await _reject_count(engine) == 0


async def test_overlapping_batch_inserts_only_the_new_events(store: EventStore) -> None:
    epoch = await _claimed(store)
    await store.write_batch(SESSION, epoch, batch(1, 2, 3), RECEIVED_AT)

    result = await store.write_batch(SESSION, epoch, batch(2, 3, 4, 5), RECEIVED_AT)

    assert result == BatchResult(inserted=2, duplicates=2, rejected=0, cursor_seq=5)
    assert [s for s, _ in await stored_ids(store, SESSION)] == [1, 2, 3, 4, 5]


async def test_seq_gaps_are_stored_as_they_come_and_the_cursor_is_the_highest(store: EventStore) -> None:
    # Legacy turns burn seqs of the same aggregate (docs/upstream.md §3.1): gaps are normal.
    epoch = await _claimed(store)

    result = await store.write_batch(SESSION, epoch, batch(1, 2, 5, 9), RECEIVED_AT)

    assert result.cursor_seq == 9
    assert [s for s, _ in await stored_ids(store, SESSION)] == [1, 2, 5, 9]


async def test_replaying_an_older_batch_never_moves_the_cursor_back(store: EventStore) -> None:
    epoch = await _claimed(store)
    await store.write_batch(SESSION, epoch, batch(1, 2, 3, 4), RECEIVED_AT)
    await store.write_batch(SESSION, epoch, batch(8, 9), RECEIVED_AT)

    result = await store.write_batch(SESSION, epoch, batch(2, 3), RECEIVED_AT)

    assert result == BatchResult(inserted=0, duplicates=2, rejected=0, cursor_seq=9)
    session = await store.get_session(SESSION)
    assert session is not None and session.cursor_seq == 9


async def test_an_older_event_filling_a_gap_is_stored_without_moving_the_cursor_back(
    store: EventStore,
) -> None:
    epoch = await _claimed(store)
    await store.write_batch(SESSION, epoch, batch(1, 9), RECEIVED_AT)

    result = await store.write_batch(SESSION, epoch, batch(5), RECEIVED_AT)

    assert result == BatchResult(inserted=1, duplicates=0, rejected=0, cursor_seq=9)
    assert [s for s, _ in await stored_ids(store, SESSION)] == [1, 5, 9]


async def test_event_times_set_first_once_and_last_forward_only(store: EventStore) -> None:
    epoch = await _claimed(store)
    await store.write_batch(SESSION, epoch, batch(3, 4), RECEIVED_AT)
    await store.write_batch(SESSION, epoch, batch(1, 2), RECEIVED_AT)

    session = await store.get_session(SESSION)

    assert session is not None
    assert session.first_event_at == ms_to_datetime(BASE_MS + 3)
    assert session.last_event_at == ms_to_datetime(BASE_MS + 4)


async def test_events_without_a_time_fall_back_to_received_at(store: EventStore) -> None:
    epoch = await _claimed(store)
    event = chat_event(1)
    untimed = type(event)(envelope=event.envelope, kind=event.kind, timestamp_ms=None)

    await store.write_batch(SESSION, epoch, [untimed], RECEIVED_AT)

    session = await store.get_session(SESSION)
    assert session is not None and session.last_event_at == RECEIVED_AT


async def test_a_batch_of_200_events_is_written_in_one_call(store: EventStore) -> None:
    epoch = await _claimed(store)
    events = batch(*range(1, 201))

    result = await store.write_batch(SESSION, epoch, events, RECEIVED_AT)

    assert result == BatchResult(inserted=200, duplicates=0, rejected=0, cursor_seq=200)
    assert await stored_ids(store, SESSION) == [(s, event_id(s)) for s in range(1, 201)]


async def test_an_event_without_seq_is_a_caller_bug_and_writes_nothing(store: EventStore) -> None:
    epoch = await _claimed(store)

    with pytest.raises(ValueError, match="seq"):
        await store.write_batch(SESSION, epoch, [*batch(1, 2), chat_event(None)], RECEIVED_AT)

    assert await stored_ids(store, SESSION) == []


async def test_an_empty_batch_returns_the_stored_cursor(store: EventStore) -> None:
    epoch = await _claimed(store)
    await store.write_batch(SESSION, epoch, batch(1, 2), RECEIVED_AT)

    assert await store.write_batch(SESSION, epoch, [], RECEIVED_AT) == BatchResult(0, 0, 0, 2)


async def test_sessions_do_not_share_seqs_or_cursors(store: EventStore) -> None:
    other = "ses_0002integration"
    epoch_a = await _claimed(store)
    epoch_b = await _claimed(store, other)

    await store.write_batch(SESSION, epoch_a, batch(1, 2, 3), RECEIVED_AT)
    result = await store.write_batch(other, epoch_b, batch(1, 2, session_id=other), RECEIVED_AT)

    assert result == BatchResult(inserted=2, duplicates=0, rejected=0, cursor_seq=2)
    assert [s for s, _ in await stored_ids(store, other)] == [1, 2]
    assert [s for s, _ in await stored_ids(store, SESSION)] == [1, 2, 3]


async def test_upstreams_do_not_share_rows(store: EventStore, engine: AsyncEngine) -> None:
    elsewhere = EventStore(engine, "another-upstream")
    epoch = await _claimed(store)
    epoch_elsewhere = await _claimed(elsewhere)

    await store.write_batch(SESSION, epoch, batch(1, 2), RECEIVED_AT)
    result = await elsewhere.write_batch(SESSION, epoch_elsewhere, batch(1, 2), RECEIVED_AT)

    assert result.inserted == 2
    assert await stored_ids(elsewhere, SESSION) == await stored_ids(store, SESSION)
