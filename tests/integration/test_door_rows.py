"""The command door's store seam, bridge.command_service.rows.DoorRows, on PostgreSQL (`DoorStore`) and on
its in-memory twin (tests/support/door_twins.DoorStoreTwin): the same test functions on both. The command
rows' port itself is held to both by test_port_commands.py; this holds what the door adds to it (the
tombstone check, the erasure), so the door's unit tests, which run on the twin, do not drift from the SQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.command_service.rows import DoorStore
from tests.support.commands_twin import OTHER, SID
from tests.support.door_twins import UPSTREAM, DoorStoreTwin


@pytest.fixture(params=["postgres", "twin"])
async def rows(request: pytest.FixtureRequest, engine: AsyncEngine) -> AsyncIterator[Any]:
    yield DoorStoreTwin(upstream=UPSTREAM) if request.param == "twin" else DoorStore(engine, UPSTREAM)


async def test_erasure_tombstones_and_a_second_one_says_already(rows: Any) -> None:
    assert await rows.tombstoned(SID) is False
    first = await rows.erase(SID, erased_by="alice", reason="gdpr", command_id="e1")
    assert (first.root, first.already, SID in first.sessions) == (SID, False, True)
    assert await rows.tombstoned(SID) is True and await rows.tombstoned(OTHER) is False
    assert (await rows.erase(SID, erased_by="alice", reason="gdpr", command_id="e1")).already is True
