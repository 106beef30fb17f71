"""Statuses and titles of many sessions in one transaction (bridge.store.chat_sessions.status_batch) on the
real PostgreSQL: the lease holder only, never a deleted session, one NOTIFY per status written, a session's
statuses in their order."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.chat_sessions import LeaseStore
from bridge.store.notices import StatusNotice
from bridge.store.writes import EventStore
from tests.support.status_listener import status_listener
from tests.support.waiting import wait_until

from .conftest import UPSTREAM

A = "host-a:100:aaaaaaaaaaaa"
B = "host-b:200:bbbbbbbbbbbb"


@pytest.fixture
def leases(engine: AsyncEngine) -> LeaseStore:
    return LeaseStore(engine, UPSTREAM)


@pytest_asyncio.fixture
async def notices(database_url: str) -> AsyncIterator[list[StatusNotice]]:
    seen: list[StatusNotice] = []
    async with status_listener(database_url, UPSTREAM, seen.append):
        yield seen


async def test_many_sessions_statuses_and_titles_in_one_transaction(
        store: EventStore, leases: LeaseStore, notices: list[StatusNotice]) -> None:
    ours = [f"ses_ours{i:03d}" for i in range(300)]
    for sid in ours:
        await store.claim(sid, A)
    await store.claim("ses_theirs", B)
    await store.claim("ses_gone", A)
    await store.mark_deleted("ses_gone")
    await wait_until(lambda: any(n.session_id == "ses_gone" for n in notices), 10, 0.02, message="tombstone")
    notices.clear()
    before = {sid: (await store.get_session(sid)).status_version for sid in ours}  # type: ignore[union-attr]

    rounds = [[(sid, "running", None) for sid in ours] + [("ses_theirs", "idle", "not ours"),
                                                          ("ses_gone", "idle", None)],
              [(ours[0], "retrying", "attempt 1: rate limited")], [(ours[0], "idle", None)]]
    written = await leases.write_activity(A, rounds, [(ours[1], "First"), (ours[2], "Second")])
    assert written == [set(ours), {ours[0]}, {ours[0]}]

    first = await store.get_session(ours[0])
    assert first is not None and (first.status, first.status_version) == ("idle", before[ours[0]] + 3)
    for sid in ours[1:]:
        row = await store.get_session(sid)
        assert row is not None and (row.status, row.status_version) == ("running", before[sid] + 1)
    theirs, gone = await store.get_session("ses_theirs"), await store.get_session("ses_gone")
    assert theirs is not None and (theirs.status_reason, theirs.status_version) == (None, 0)
    assert gone is not None and gone.status == "deleted"
    titled = [await store.get_session(s) for s in ours[1:3]]
    assert [r.title for r in titled if r is not None] == ["First", "Second"]

    await wait_until(lambda: len(notices) >= 302, 10, 0.02, message="one notice per status written")
    assert len(notices) == 302
    assert {n.session_id for n in notices} == set(ours)
    assert [(n.status, n.reason, n.version) for n in notices if n.session_id == ours[0]] == [
        ("running", None, before[ours[0]] + 1), ("retrying", "attempt 1: rate limited", before[ours[0]] + 2),
        ("idle", None, before[ours[0]] + 3)]


async def test_a_title_is_written_only_when_it_changes_and_nothing_is_a_no_op(
        store: EventStore, leases: LeaseStore) -> None:
    await store.claim("ses_t", A)
    assert await leases.write_activity(A, [], []) == []
    await leases.write_activity(A, [], [("ses_t", "T")])
    row = await store.get_session("ses_t")
    assert row is not None and row.title == "T"
    stamp = row.updated_at
    await leases.write_activity(A, [], [("ses_t", "T")])
    again = await store.get_session("ses_t")
    assert again is not None and again.updated_at == stamp


async def test_a_session_twice_in_one_statement_is_refused(leases: LeaseStore) -> None:
    with pytest.raises(ValueError, match="successive statements"):
        await leases.write_activity(A, [[("ses_x", "idle", None), ("ses_x", "running", None)]], [])

