"""WebSocket attacks: hostile session ids, ids nobody knows, oversized events, long session lists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.fanout import protocol as p
from bridge.fanout.queue import QueueLimits
from bridge.fanout.service import upstream_confirms
from bridge.upstream.client import UpstreamClient
from tests.support.fake_upstream import FakeUpstream
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import Node

from .conftest import session_rows

KNOWN = "ses_known"

HOSTILE_IDS = [
    "ses_a\x00b",  # NUL: PostgreSQL text cannot hold it; the claim failed in the driver, forever
    "ses_\ud800",  # a lone surrogate: not encodable
    "x/../ses_REAL",  # path traversal into another session's upstream routes
    "ses_a/../../api/session",
    "ses_a#frag",
    "ses_a?after=0",
    "ses_a%2F..",
    "ses_" + "a" * 200,
    "SES_upper",
    "anything",
    " ses_a",
]


async def fence(c: WsClient, ref: str = "fence") -> None:
    await c.send(op="ping", id=ref)
    await c.wait_for("pong", id=ref)


@pytest.mark.parametrize("sid", HOSTILE_IDS, ids=repr)
async def test_a_hostile_session_id_is_bad_message_before_anything_and_creates_nothing(
    nodes: Callable[..., Any], clients: list[WsClient], engine: AsyncEngine, sid: str
) -> None:
    node: Node = await nodes()
    c = await WsClient.connect(node.url, node.token())
    clients.append(c)
    for op in ("subscribe", "unsubscribe"):
        await c.ws.send_json({"op": op, "session": sid, "id": op})
        err = await c.wait_for("error", id=op)
        assert err["code"] == p.ERR_BAD_MESSAGE and "ses_" in err["message"]
    await fence(c)  # the connection stays usable
    assert node.warmed == [] and await session_rows(engine) == []
    assert node.hub.sessions() == []


async def test_a_well_formed_id_the_upstream_does_not_know_gets_unknown_session_and_leaves_no_row(
    nodes: Callable[..., Any], clients: list[WsClient], engine: AsyncEngine, fake: FakeUpstream
) -> None:
    fake.add_session("ses_real")
    async with UpstreamClient(fake.url) as upstream:
        node: Node = await nodes(confirm=upstream_confirms(upstream))
        await node.write_seqs(KNOWN, 1)  # stored here already: served without asking the upstream
        c = await WsClient.connect(node.url, node.token())
        clients.append(c)
        await c.subscribe("ses_nobody", id="u")
        err = await c.wait_for("error", id="u")
        assert err["code"] == p.ERR_UNKNOWN_SESSION and err["session"] == "ses_nobody"
        await c.subscribe(KNOWN, id="k")
        assert (await c.wait_for("subscribed", id="k"))["head"] == 1
        await c.subscribe("ses_real", id="r")  # new here, but the upstream has it: followed
        assert (await c.wait_for("subscribed", id="r"))["head"] == -1
    assert node.warmed == [KNOWN, "ses_real"]
    assert sorted(await session_rows(engine)) == [KNOWN]  # nothing for ses_nobody, ever
    assert "ses_nobody" not in node.hub.sessions()


async def test_an_event_larger_than_the_client_queue_is_sent_as_a_reference_instead_of_4429_forever(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    limits = QueueLimits(max_messages=100, max_bytes=64 * 1024)
    node: Node = await nodes(limits=limits)
    await node.write_seqs(KNOWN, 1)
    await node.write_seqs(KNOWN, 2, text_size=100 * 1024)  # larger than the whole queue
    await node.write_seqs(KNOWN, 3)
    for _ in range(2):  # a resume gets the same answer, not a close
        c = await WsClient.connect(node.url, node.token())
        clients.append(c)
        await c.subscribe(KNOWN)
        await c.wait_for("caught_up")
        assert c.seqs(KNOWN) == [1, 2, 3]
        big = c.of("event")[1]
        assert big["truncated"]["bytes"] > limits.max_bytes and big["data"] == {}
        assert big["kind"] == "text:end" and "text" not in big["fields"]
        assert "truncated" not in c.of("event")[0]
        await fence(c)
        assert c.close_code is None
    # Live as well: a subscriber that is caught up gets the reference too.
    await node.write_seqs(KNOWN, 4, text_size=100 * 1024)
    assert "truncated" in await c.wait_for("event", seq=4)


async def test_the_sessions_reply_is_paged_and_scoped(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node: Node = await nodes()
    ids = [f"ses_p{i}" for i in range(7)]
    for sid in ids:
        await node.write_seqs(sid, 1)
    c = await WsClient.connect(node.url, node.token())
    clients.append(c)
    seen: list[str] = []
    cursor: str | None = None
    for page in range(10):
        op: dict[str, Any] = {"op": "sessions", "limit": 3, "id": page}
        if cursor is not None:
            op["next"] = cursor
        await c.send(**op)
        reply = await c.wait_for("sessions", id=page)
        assert len(reply["sessions"]) <= 3
        seen += [s["session"] for s in reply["sessions"]]
        cursor = reply["next"]
        if cursor is None:
            break
    assert sorted(seen) == ids and len(seen) == len(set(seen))
    await c.send(op="sessions", limit=100000, id="big")
    assert (await c.wait_for("error", id="big"))["code"] == p.ERR_BAD_MESSAGE
    await c.send(op="sessions", next="garbage", id="bad")
    assert (await c.wait_for("error", id="bad"))["code"] == p.ERR_BAD_MESSAGE
    scoped = await WsClient.connect(node.url, node.token(ids[:2]))
    clients.append(scoped)
    await scoped.send(op="sessions", id="s")  # what the viewer sends on every hello
    reply = await scoped.wait_for("sessions", id="s")
    assert sorted(s["session"] for s in reply["sessions"]) == ids[:2] and reply["next"] is None


async def test_repeating_a_subscribe_to_an_unknown_id_does_not_repeat_upstream_requests(
    fake: FakeUpstream
) -> None:
    now = [0.0]
    calls: list[str] = []

    class Counting(UpstreamClient):
        async def get_session(self, session_id: str) -> dict[str, Any]:
            calls.append(session_id)
            return await super().get_session(session_id)

    async with Counting(fake.url) as upstream:
        confirm = upstream_confirms(upstream, clock=lambda: now[0])
        for _ in range(50):
            assert not await confirm("ses_nobody")
        assert calls == ["ses_nobody"]
        now[0] += 11  # remembered for 10 s only: a session created later under this id is found
        fake.add_session("ses_nobody")
        assert await confirm("ses_nobody")
        assert calls == ["ses_nobody", "ses_nobody"]
