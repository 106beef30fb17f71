"""One writer per session: the lease epoch fences every write batch (docs/lifecycle.md, "Ownership:
incarnations, leases, fencing")."""

from __future__ import annotations

import pytest

from bridge.errors import LeaseLost
from bridge.store.writes import EventStore
from tests.support.chat_events import RECEIVED_AT, SESSION, batch
from tests.support.stored_rows import stored_ids


async def test_claim_creates_the_session_and_returns_epoch_1_and_cursor_0(store: EventStore) -> None:
    assert await store.claim(SESSION, "owner-1", "/work/dir") == (1, 0)

    session = await store.get_session(SESSION)
    assert session is not None
    assert (session.lease_owner, session.lease_epoch, session.directory) == ("owner-1", 1, "/work/dir")
    assert (session.status, session.deleted, session.cursor_seq) == ("idle", False, 0)


async def test_a_forced_claim_moves_the_epoch_on_and_returns_the_stored_cursor(store: EventStore) -> None:
    epoch, _ = await store.claim(SESSION, "owner-1", "/work/dir")
    await store.write_batch(SESSION, epoch, batch(1, 2, 7), RECEIVED_AT)

    assert await store.claim(SESSION, "owner-2", holder_dead=lambda _owner: True) == (2, 7)

    session = await store.get_session(SESSION)
    assert session is not None
    # A claim without a directory keeps the known one.
    assert (session.lease_owner, session.directory) == ("owner-2", "/work/dir")


async def test_a_write_with_a_stale_epoch_is_fenced_and_writes_nothing(store: EventStore) -> None:
    old_epoch, _ = await store.claim(SESSION, "owner-1")
    new_epoch, _ = await store.claim(SESSION, "owner-2", holder_dead=lambda _owner: True)

    with pytest.raises(LeaseLost):
        await store.write_batch(SESSION, old_epoch, batch(1, 2, 3), RECEIVED_AT)

    assert await stored_ids(store, SESSION) == []
    session = await store.get_session(SESSION)
    assert session is not None and session.cursor_seq == 0
    assert (await store.write_batch(SESSION, new_epoch, batch(1), RECEIVED_AT)).inserted == 1


async def test_a_write_to_an_unclaimed_session_is_fenced(store: EventStore) -> None:
    with pytest.raises(LeaseLost):
        await store.write_batch(SESSION, 1, batch(1), RECEIVED_AT)

    assert await store.get_session(SESSION) is None


async def test_release_keeps_history_and_cursor_and_fences_the_released_epoch(store: EventStore) -> None:
    epoch, _ = await store.claim(SESSION, "owner-1")
    await store.write_batch(SESSION, epoch, batch(1, 2), RECEIVED_AT)

    await store.release(SESSION, epoch)

    session = await store.get_session(SESSION)
    assert session is not None
    assert (session.lease_owner, session.lease_epoch, session.cursor_seq) == (None, epoch, 2)
    assert [s for s, _ in await stored_ids(store, SESSION)] == [1, 2]
    with pytest.raises(LeaseLost):
        await store.write_batch(SESSION, epoch, batch(3), RECEIVED_AT)
    assert await store.claim(SESSION, "owner-2") == (epoch + 1, 2)


async def test_release_with_a_stale_epoch_leaves_the_new_owner_alone(store: EventStore) -> None:
    old_epoch, _ = await store.claim(SESSION, "owner-1")
    new_epoch, _ = await store.claim(SESSION, "owner-2", holder_dead=lambda _owner: True)

    await store.release(SESSION, old_epoch)

    session = await store.get_session(SESSION)
    assert session is not None and session.lease_owner == "owner-2"
    assert (await store.write_batch(SESSION, new_epoch, batch(1), RECEIVED_AT)).inserted == 1
