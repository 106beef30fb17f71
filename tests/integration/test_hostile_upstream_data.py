"""Upstream data PostgreSQL cannot hold never fails a claim: a NUL in `location.directory` (from a live
event or the session list) is dropped as a hint instead of raising in the driver on every retry."""

from __future__ import annotations

from bridge.store.writes import EventStore

SID = "ses_nul_directory"


async def test_a_nul_in_the_directory_does_not_fail_the_claim(store: EventStore) -> None:
    epoch, cursor = await store.claim(SID, "owner-1", "/work/a\x00b")
    row = await store.get_session(SID)
    assert (epoch, cursor) == (1, 0) and row is not None and row.directory is None


async def test_a_nul_directory_later_keeps_the_directory_known(store: EventStore) -> None:
    await store.claim(SID, "owner-1", "/work/a")
    await store.claim(SID, "owner-1", "/work/\x00")
    row = await store.get_session(SID)
    assert row is not None and row.directory == "/work/a"
