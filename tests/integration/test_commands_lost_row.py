"""A prompt whose `chat_commands` row was lost (a failover to a standby that lacked it: docs/scaling.md)
is retried with the same `command_id`: the bridge finds the first attempt's message id in the mirror (its
`prompt.admitted`, re-read from the sync log) and re-sends that id, so the serve admits it once
(docs/upstream.md §17) although the derived id's time part would differ now."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.command_service import CommandService
from bridge.commands.ratelimit import RateLimiter
from bridge.http.commands import CommandsContext, add_command_routes
from bridge.store.commands_pending import CommandStore
from bridge.store.writes import EventStore

from .chat_events import chat_event
from .test_commands_http import PROMPT, SECRET, SID, UPSTREAM, Clock, TwinUpstream, auth


@pytest.fixture
async def served(engine: AsyncEngine) -> AsyncIterator[tuple[TestClient[Any, Any], TwinUpstream, Clock]]:
    twin, clock = TwinUpstream(), Clock()
    service = CommandService(CommandStore(engine, UPSTREAM), twin,  # type: ignore[arg-type]
                             limiter=RateLimiter(rate_per_s=1.0, burst=6, clock=clock), clock=clock,
                             exit_after_upstream="", directories=("/srv/agent",),
                             prompt_runtime="v2")  # the twin is a v2 serve
    app = web.Application()
    add_command_routes(app, CommandsContext(service, SECRET))
    async with TestClient(TestServer(app)) as client:
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


async def test_a_lost_row_is_retried_with_the_first_attempt_s_message_id(
        engine: AsyncEngine, served: tuple[TestClient[Any, Any], TwinUpstream, Clock]) -> None:
    http, twin, clock = served
    first = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    assert first.status == 200
    mid = (await first.json())["message_id"]
    await mirror_admission(engine, mid)
    await lose_command_rows(engine)
    clock.t += 5.0  # a later attempt would derive another time part

    again = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    assert again.status == 200 and (await again.json())["message_id"] == mid
    sent = [args[2] for name, args in twin.calls if name == "prompt"]
    assert sent == [mid, mid] and len(twin.admitted) == 1  # the serve admitted it once


async def test_without_the_mirror_s_row_the_retry_derives_a_new_id(
        engine: AsyncEngine, served: tuple[TestClient[Any, Any], TwinUpstream, Clock]) -> None:
    """The limit, stated: before the follower re-read the admission, nothing tells the retry the old id."""
    http, twin, clock = served
    first = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    await lose_command_rows(engine)
    clock.t += 5.0
    again = await http.post(f"/v1/sessions/{SID}/prompt", json=PROMPT, headers=auth())
    assert (await again.json())["message_id"] != (await first.json())["message_id"]
    assert len(twin.admitted) == 2
