"""A prompt whose `chat_commands` row was lost (a failover to a standby that lacked it: docs/scaling.md)
is retried with the same `command_id`: a v2 prompt's message id is a pure function of the command, so the
retry re-sends it and the serve admits it once (docs/upstream.md §17) whether or not the mirror has re-read
the admission; an id the mirror holds with the command's digest (a first attempt's time-stamped id) is
re-sent as it was."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.commands.model import upstream_message_id
from bridge.store.writes import EventStore
from tests.support.chat_events import chat_event
from tests.support.commands_twin import SID, UpstreamCommandsTwin
from tests.support.serve_model import Clock

from .test_commands_http import PROMPT, UPSTREAM, auth, command_routes


@pytest.fixture
async def served(engine: AsyncEngine) -> AsyncIterator[tuple[TestClient[Any, Any], UpstreamCommandsTwin, Clock]]:
    twin, clock = UpstreamCommandsTwin(), Clock(1000.0)
    async with command_routes(engine, twin, clock) as client:
        yield client, twin, clock


async def lose_command_rows(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("DELETE FROM chat_commands WHERE upstream = :u"), {"u": UPSTREAM})


async def mirror_admission(engine: AsyncEngine, mid: str) -> None:
    """What the follower stores (again, after the failover's repair) for the admitted prompt."""
    store = EventStore(engine, UPSTREAM)
    epoch, _ = await store.claim(SID, "follower")
    admitted = chat_event(1, session_id=SID, type_="session.next.prompt.admitted", kind="prompt:admitted",
                          data={"messageID": mid}, message_id=mid)
    await store.write_batch(SID, epoch, [admitted], datetime.now(UTC))


async def test_a_lost_row_re_sends_the_time_stamped_id_the_mirror_holds(
        engine: AsyncEngine, served: tuple[TestClient[Any, Any], UpstreamCommandsTwin, Clock]) -> None:
    """A first attempt made with a time-stamped id (a legacy prompt, or a bridge before pure v2 ids): the
    mirror's message with the command's digest gives its id back, and that id is re-sent."""
    http, twin, _ = served
    stamped = upstream_message_id(UPSTREAM, SID, PROMPT["command_id"], 1796005680438, "alice")
    await mirror_admission(engine, stamped)
    again = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    assert again.status == 200 and (await again.json())["message_id"] == stamped
    sent = [args[2] for name, args in twin.calls if name == "prompt"]
    assert sent == [stamped] and list(twin.admitted) == [stamped]


async def test_without_the_mirror_s_row_the_retry_sends_the_same_id_and_the_serve_admits_it_once(
        engine: AsyncEngine, served: tuple[TestClient[Any, Any], UpstreamCommandsTwin, Clock]) -> None:
    """The row lost and the mirror not repaired yet: the v2 id is a pure function of the command, so the
    retry re-sends the same id and the serve's own check keeps one admission (docs/upstream.md §17)."""
    http, twin, clock = served
    first = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    assert first.status == 200
    mid = (await first.json())["message_id"]
    await lose_command_rows(engine)
    clock.now += 5.0
    again = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    assert again.status == 200 and (await again.json())["message_id"] == mid
    sent = [args[2] for name, args in twin.calls if name == "prompt"]
    assert sent == [mid, mid] and list(twin.admitted) == [mid]  # nothing admitted twice
