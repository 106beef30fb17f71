"""The command door's store seam, bridge.command_service.rows.DoorStore, and its in-memory twin
(tests/support/door_twins.DoorStoreTwin) answer alike: the same test functions, run against PostgreSQL and
against the twin (the door's unit tests run on the twin, so it must not drift from the SQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.command_service.rows import DoorStore
from bridge.commands.model import parse_command
from bridge.store.commands_pending import CommandKey
from tests.support.commands_twin import SID
from tests.support.door_twins import UPSTREAM, DoorStoreTwin

MID, STAMPED = "msg_0a1b2c3d4e5fAAAAAAAAAAAAAA", "msg_0a1b2c3d4e60AAAAAAAAAAAAAA"


@pytest.fixture(params=["postgres", "twin"])
async def rows(request: pytest.FixtureRequest, engine: AsyncEngine) -> AsyncIterator[Any]:
    yield DoorStoreTwin(UPSTREAM) if request.param == "twin" else DoorStore(engine, UPSTREAM)


def _prompt(text: str = "hi") -> Any:
    return parse_command("prompt", {"command_id": "c1", "text": text, "delivery": "steer"}, SID)


async def test_a_command_row_is_claimed_once_per_subject(rows: Any) -> None:
    row, fresh = await rows.claim(_prompt(), "alice", "prompt", MID, SID)
    assert fresh and (row.state, row.upstream_id, row.subject, row.session_id) == ("pending", MID, "alice", SID)
    again, fresh = await rows.claim(_prompt("other"), "alice", "prompt", "msg_x", SID)
    assert not fresh and again.upstream_id == MID and again.fingerprint == row.fingerprint
    _, fresh = await rows.claim(_prompt(), "bob", "prompt", MID, SID)  # command ids are per subject
    assert fresh


async def test_completion_only_from_pending_or_sending(rows: Any) -> None:
    await rows.claim(_prompt(), "alice", "prompt", MID, SID)
    key = CommandKey("alice", SID, "c1")
    await rows.complete(key, state="done", http_status=200, result={"ok": 1}, upstream_status=204)
    await rows.complete(key, state="failed", http_status=500, result={"ok": 0})  # final already: kept
    row, _ = await rows.claim(_prompt(), "alice", "prompt", MID, SID)
    assert (row.state, row.http_status, row.result) == ("done", 200, {"ok": 1})


async def test_the_upstream_id_changes_once_and_only_from_what_it_was(rows: Any) -> None:
    row, _ = await rows.claim(_prompt(), "alice", "prompt", MID, SID)
    key = CommandKey("alice", SID, "c1")
    assert await rows.swap_upstream_id(key, MID, STAMPED) == STAMPED
    assert await rows.swap_upstream_id(key, MID, "msg_another") == STAMPED  # a racing twin agrees on one
    got = await rows.use_upstream_id(_prompt(), "alice", row, MID)
    assert got.upstream_id == MID
    again, _ = await rows.claim(_prompt(), "alice", "prompt", None, SID)
    assert again.upstream_id == MID


async def test_erasure_tombstones_and_a_second_one_says_already(rows: Any) -> None:
    assert await rows.tombstoned(SID) is False
    first = await rows.erase(SID, erased_by="alice", reason="gdpr", command_id="e1")
    assert (first.root, first.already, SID in first.sessions) == (SID, False, True)
    assert await rows.tombstoned(SID) is True
    assert (await rows.erase(SID, erased_by="alice", reason="gdpr", command_id="e1")).already is True


async def test_unknown_sessions_and_requests_are_none(rows: Any) -> None:
    assert await rows.session(SID) is None
    assert await rows.permission_reply("per_none") is None
    assert await rows.earlier_message_id(SID, MID) is None
    assert await rows.for_session(SID) == []
