"""Permission requests asked or answered while `/api/event` was down (docs/upstream.md §4.4: live-only upstream):
after every live reconnect the fan-out re-syncs the pending requests of its subscribed sessions from
`GET /api/session/{id}/permission`, against the fake upstream and a real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.fanout.resync import RESOLVED_NOTE
from bridge.upstream.client import UpstreamClient
from tests.support.fake_upstream import FakeUpstream
from tests.support.resync_stack import ResyncStack as Stack
from tests.support.resync_stack import resync_stack

SID = "ses_perm_resync"
SECRET = "r" * 48
UPSTREAM = "it-upstream"


def request(rid: str) -> dict[str, Any]:
    """One item of `GET /api/session/{id}/permission` (captures/k-permission-ask/04-session-permissions.json)."""
    return {"id": rid, "sessionID": SID, "action": "bash", "resources": ["touch x"], "save": ["touch x"],
            "source": {"type": "tool", "messageID": "msg_1", "callID": f"call_{rid}"}}


@pytest.fixture
async def stack(engine: AsyncEngine, database_url: str, fake: FakeUpstream,
                fake_client: UpstreamClient) -> AsyncIterator[Stack]:
    async with resync_stack(engine, database_url, fake, fake_client, SID, SECRET, UPSTREAM) as s:
        yield s


async def test_a_request_asked_while_disconnected_reaches_the_subscriber_after_the_reconnect(stack: Stack) -> None:
    stack.fake.permissions[SID] = [request("per_missed")]  # asked upstream, never seen on /api/event
    await stack.reconnect()
    msg = await stack.ws.wait_for("permission", request_id="per_missed")
    assert msg["state"] == "asked" and msg["action"] == "bash" and msg["call_id"] == "call_per_missed"
    assert msg["data"]["resources"] == ["touch x"]
    assert list(await stack.fanout.store.permission_replies(SID)) == ["per_missed"]

    await stack.reconnect()  # still pending upstream and already stored: not pushed again
    await stack.ws.send(op="ping", id=1)
    await stack.ws.wait_for("pong", id=1)
    assert len(stack.ws.of("permission")) == 1


async def test_a_stored_pending_request_gone_upstream_is_pushed_as_resolved(stack: Stack) -> None:
    stack.fake.publish_live({"id": "evt_p1", "type": "permission.v2.asked", "location": {"directory": "/"},
                             "data": request("per_gone")})
    await stack.ws.wait_for("permission", request_id="per_gone", state="asked")
    # Answered (reply event lost) while the stream was down: no longer pending upstream.
    await stack.reconnect()
    msg = await stack.ws.wait_for("permission", request_id="per_gone", state="replied")
    assert msg["reply"] == "unknown" and msg["data"]["note"] == RESOLVED_NOTE
    assert await stack.fanout.store.permission_replies(SID) == {"per_gone": "unknown"}
    assert await stack.fanout.store.pending_permissions(SID) == []


async def test_an_upstream_error_during_the_resync_does_not_break_the_stream(stack: Stack) -> None:
    stack.fake.fail_status["permission"] = 500
    stack.fake.permissions[SID] = [request("per_later")]
    await stack.reconnect()
    # The live stream still relays: a request asked live now arrives.
    stack.fake.publish_live({"id": "evt_p2", "type": "permission.v2.asked", "location": {"directory": "/"},
                             "data": request("per_live")})
    await stack.ws.wait_for("permission", request_id="per_live")
    assert stack.ws.of("permission", SID)[0]["request_id"] == "per_live"  # nothing judged on a failed fetch

    del stack.fake.fail_status["permission"]
    stack.fake.permissions[SID] = [request("per_later"), request("per_live")]
    await stack.reconnect()  # the next reconnect re-syncs again
    await stack.ws.wait_for("permission", request_id="per_later")
    assert {m["request_id"]: m["state"] for m in stack.ws.of("permission")} == {"per_live": "asked",
                                                                               "per_later": "asked"}
