"""Live session state kept by the bridge, on the real `opencode serve` 1.18.33 with the mock provider
(docs/commands.md "Session state", docs/upstream.md §20): the todo list is relayed live, served from what the
bridge keeps (even while the serve is down), pushed to a new subscriber, not pushed again when the re-read
after the `/global/event` reconnect finds it unchanged; a `session.error` is relayed and recorded for the
audit."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fanout_client import WsClient
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

from .test_session_content import Bridge, bridge, token  # noqa: F401

pytestmark = pytest.mark.e2e

PLAN = [{"content": "Write tests", "status": "in_progress", "priority": "high"},
        {"content": "Ship it", "status": "pending", "priority": "low"}]


async def test_the_todo_list_is_kept_served_and_pushed_at_subscribe(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge: Bridge  # noqa: F811
) -> None:
    sid = await opencode.create_session()
    await opencode.prompt_async(sid, "MOCK:todo plan")
    await opencode.wait_legacy_idle(sid, 1)

    async def served() -> list[Any] | None:
        status, body = await bridge.get(f"/v1/sessions/{sid}/todo", token("read", [sid]))
        return body["data"] if status == 200 and body["data"] else None

    assert await wait_until(served, 30, 0.2, message="todo served") == PLAN

    c = await WsClient.connect(bridge.proc.url, token("read", [sid]))
    try:
        await c.subscribe(sid)
        pushed = await c.wait_for("todo", 30, session=sid)  # a new page gets the current list
        assert pushed["todos"] == PLAN

        await opencode.stop()
        status, body = await bridge.get(f"/v1/sessions/{sid}/todo", token("read", [sid]))
        assert (status, body["data"]) == (200, PLAN)  # kept: there is no serve to ask now
        await opencode.start()
        # the live stream reconnects and the list is read again (tests/integration/test_state_resync.py
        # shows a change made while away pushed); the serve kept it, so it is no news: no second frame
        upstream = [{k: t[k] for k in ("content", "status", "priority")}
                    for t in await opencode.request("GET", f"/session/{sid}/todo")]
        assert upstream == PLAN
        await opencode.prompt_async(sid, "MOCK:text after the restart")
        await opencode.wait_legacy_idle(sid, 2)
        status, body = await bridge.get(f"/v1/sessions/{sid}/todo", token("read", [sid]))
        assert (status, body["data"]) == (200, PLAN) and len(c.of("todo", sid)) == 1
    finally:
        await c.close()
    status, diff = await bridge.get(f"/v1/sessions/{sid}/diff", token("read", [sid]))
    assert status == 200 and isinstance(diff["data"], list)


async def test_a_session_error_is_relayed_and_recorded(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge: Bridge  # noqa: F811
) -> None:
    sid = await opencode.create_session()
    await opencode.prompt_async(sid, "MOCK:text hello")  # the location booted (a few seconds the first time)
    await opencode.wait_legacy_idle(sid, 1)
    c = await WsClient.connect(bridge.proc.url, token("read", [sid]))
    try:
        await c.subscribe(sid)
        await c.wait_for("caught_up", 30, session=sid)
        await opencode.prompt_async(sid, "MOCK:e400 refuse")
        frame = await c.wait_for("session_error", 60, session=sid)
        assert frame["error_type"] and frame["error_message"]
    finally:
        await c.close()

    async def recorded() -> list[Any] | None:
        status, body = await bridge.get(f"/v1/sessions/{sid}/errors", token("read", [sid]))
        return body["data"] if status == 200 and body["data"] else None

    rows = await wait_until(recorded, 30, 0.2, message="session error recorded")
    assert [(r["error_type"], r["error_message"]) for r in rows] == [(frame["error_type"], frame["error_message"])]
