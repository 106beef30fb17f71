"""The status port's contract (bridge.store.ports.status, docs/ports.md), run on PostgreSQL and on the
in-memory twin alike: statuses written by the lease holder only, `deleted` terminal, parking, titles, gaps,
the turn state a new owner resumes from, and many sessions' writes at once."""

from __future__ import annotations

import pytest

from tests.support.store_ports import Backend, Event

A, B = "host-a:1:aaaa", "host-b:2:bbbb"


async def test_only_the_holder_writes_a_status_and_deletion_is_terminal(backend: Backend) -> None:
    leases, status = backend.leases(), backend.status()
    assert not await status.set_status("ses_unknown", A, "running", None)
    await leases.claim("ses_A", A)
    assert not await status.set_status("ses_A", B, "running", None)
    assert await status.set_status("ses_A", A, "retrying", "attempt 2")
    row = await backend.row("ses_A")
    assert row is not None and (row["status"], row["status_reason"]) == ("retrying", "attempt 2")
    await leases.mark_deleted("ses_A")
    assert not await status.set_status("ses_A", A, "idle", None)
    row = await backend.row("ses_A")
    assert row is not None and (row["status"], row["deleted"]) == ("deleted", True)


async def test_parking_gives_the_lease_back_unless_a_peer_holds_it(backend: Backend) -> None:
    leases, status = backend.leases(), backend.status()
    await leases.claim("ses_A", A)
    assert not await status.park("ses_A", B, "stuck")
    assert await status.park("ses_A", A, "stuck")
    row = await backend.row("ses_A")
    assert row is not None and (row["status"], row["lease_owner"]) == ("parked", None)
    assert [(r.session_id, r.status, r.status_reason) for r in await status.parked()] == [("ses_A", "parked", "stuck")]
    assert await leases.heartbeat(A, "host-a", 1, 15) == {}
    await leases.claim("ses_free", A)
    await leases.release("ses_free", 1)
    assert await status.park("ses_free", B, "failed 5 times")  # free: anyone may park it
    await leases.mark_deleted("ses_free")
    assert not await status.park("ses_free", A, "again")
    assert [r.session_id for r in await status.parked()] == ["ses_A"]  # a deleted one is not listed


async def test_a_title_writes_only_on_a_known_session(backend: Backend) -> None:
    leases, status = backend.leases(), backend.status()
    await status.set_title("ses_unknown", "Nobody")
    assert await backend.row("ses_unknown") is None
    await leases.claim("ses_A", A)
    await status.set_title("ses_A", "First")
    await status.set_title("ses_A", "Second")
    row = await backend.row("ses_A")
    assert row is not None and row["title"] == "Second"


async def test_a_gap_is_kept_once_in_order_and_marks_the_session_incomplete(backend: Backend) -> None:
    leases, status = backend.leases(), backend.status()
    await leases.claim("ses_A", A)
    await status.record_gap("ses_A", 8, 9)
    await status.record_gap("ses_A", 2, 4)
    await status.record_gap("ses_A", 2, 4)
    assert await status.gaps("ses_A") == [(2, 4), (8, 9)]
    row = await backend.row("ses_A")
    assert row is not None and row["incomplete"] is True
    assert await status.gaps("ses_unknown") == []


async def test_the_turn_state_is_the_status_and_the_tail_since_the_last_prompt(backend: Backend) -> None:
    leases, status = backend.leases(), backend.status()
    unknown = await status.turn_state("ses_unknown")
    assert (unknown.status, unknown.reason, unknown.tail_kinds) == ("idle", None, [])
    await leases.claim("ses_A", A)
    kinds = ["prompt:started", "step:start", "step:end", "prompt:admitted", "step:start", "text:end"]
    await backend.store_events("ses_A", 1, [Event(i + 1, k) for i, k in enumerate(kinds)])
    assert await status.set_status("ses_A", A, "running", None)
    state = await status.turn_state("ses_A")
    assert (state.status, state.tail_kinds) == ("running", ["prompt:admitted", "step:start", "text:end"])
    assert (await status.turn_state("ses_A", limit=2)).tail_kinds == ["step:start", "text:end"]


async def test_many_sessions_write_at_once_round_by_round_the_holder_only(backend: Backend) -> None:
    leases, status = backend.leases(), backend.status()
    await leases.claim("ses_A", A)
    await leases.claim("ses_B", B)
    written = await status.write_activity(
        A, [[("ses_A", "running", None), ("ses_B", "running", None)], [("ses_A", "idle", None)]],
        [("ses_A", "Title A"), ("ses_B", "Title B")])
    assert written == [{"ses_A"}, {"ses_A"}]
    a, b = await backend.row("ses_A"), await backend.row("ses_B")
    assert a is not None and b is not None
    assert (a["status"], a["title"], b["status"], b["title"]) == ("idle", "Title A", "idle", "Title B")
    with pytest.raises(ValueError, match="successive"):
        await status.write_activity(A, [[("ses_A", "running", None), ("ses_A", "idle", None)]], [])
