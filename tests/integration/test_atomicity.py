"""Events and cursor commit together or not at all, even when the connection dies mid-transaction."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge.store.schema import chat_session_events
from bridge.store.writes import BatchResult, EventStore
from tests.support.chat_events import RECEIVED_AT, SESSION, batch
from tests.support.stored_rows import stored_ids

pytestmark = pytest.mark.usefixtures("write_path")  # both ways rows go in (conftest)


async def test_a_connection_killed_between_insert_and_cursor_update_moves_neither(
    store: EventStore, engine: AsyncEngine
) -> None:
    epoch, _ = await store.claim(SESSION, "owner-1")
    await store.write_batch(SESSION, epoch, batch(1, 2), RECEIVED_AT)
    seen_inside: list[int] = []

    async def kill_writer(conn: AsyncConnection) -> None:
        # Inside the writer's open transaction the new rows exist: the kill really lands between them
        # and the cursor update.
        count = select(func.count()).select_from(chat_session_events)
        seen_inside.append(int((await conn.execute(count)).scalar_one()))
        pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        async with engine.connect() as killer:
            terminated = await killer.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid})
            assert terminated.scalar_one() is True

    doomed = EventStore(engine, store.upstream, before_cursor_update=kill_writer)
    with pytest.raises(DBAPIError):
        await doomed.write_batch(SESSION, epoch, batch(3, 4, 5), RECEIVED_AT)

    assert seen_inside == [5]
    assert [s for s, _ in await stored_ids(store, SESSION)] == [1, 2]
    session = await store.get_session(SESSION)
    assert session is not None and session.cursor_seq == 2

    retry = await store.write_batch(SESSION, epoch, batch(3, 4, 5), RECEIVED_AT)

    assert retry == BatchResult(inserted=3, duplicates=0, rejected=0, cursor_seq=5)
    assert [s for s, _ in await stored_ids(store, SESSION)] == [1, 2, 3, 4, 5]


async def test_a_failure_after_the_insert_rolls_the_rows_back(store: EventStore, engine: AsyncEngine) -> None:
    epoch, _ = await store.claim(SESSION, "owner-1")

    async def fail(conn: AsyncConnection) -> None:
        raise RuntimeError("injected")

    with pytest.raises(RuntimeError, match="injected"):
        await EventStore(engine, store.upstream, before_cursor_update=fail).write_batch(
            SESSION, epoch, batch(1, 2), RECEIVED_AT
        )

    assert await stored_ids(store, SESSION) == []
    session = await store.get_session(SESSION)
    assert session is not None and session.cursor_seq == 0
