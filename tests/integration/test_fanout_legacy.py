"""The WebSocket for legacy-driven turns (docs/websocket.md, docs/legacy.md), on real PostgreSQL and a
real socket: the legacy captures' events in arrival order, the persisted ones committed by the real writer
(as sync-log items, mapped by `normalize_legacy`), the live-only ones handed to the relay as the live
reader does. A client sees the same frames a v2 turn gives: legacy deltas concatenate to the final text,
a legacy permission request and its answer reach it, and a page opened later still sees a pending one."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.events import ChatEvent
from bridge.fanout.relay import LiveRelay
from bridge.fanout.resync import PermissionResync
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import Node
from tests.support.legacy_rows import legacy_session


@pytest.fixture
async def node(nodes: Callable[..., Awaitable[Node]]) -> Node:
    return await nodes(own_pool=True)



async def subscribed(clients: list[WsClient], node: Node, session_id: str) -> WsClient:
    c = await WsClient.connect(node.url, node.token())
    clients.append(c)
    await c.subscribe(session_id)
    await c.wait_for("caught_up", session=session_id)
    return c


async def drive(node: Node, relay: LiveRelay, session_id: str, events: list[ChatEvent],
                until: Callable[[ChatEvent], bool] = lambda e: False) -> list[ChatEvent]:
    """Feed the session's events in arrival order; stop after the first one `until` accepts. Returns the rest."""
    for i, ev in enumerate(events):
        if ev.seq is not None:
            await node.write(session_id, [ev])
        else:
            await relay.on_live_event(ev)
        if until(ev):
            return events[i + 1 :]
    return []


@pytest.mark.parametrize("name", ["x1-legacy-tool-turn", "x2-legacy-reasoning", "x5-legacy-permission"])
async def test_legacy_deltas_reach_the_client_and_concatenate_to_the_final_text(
    name: str, node: Node, clients: list[WsClient]
) -> None:
    session_id, events = legacy_session(name)
    top = max(e.seq or 0 for e in events)
    c = await subscribed(clients, node, session_id)
    await drive(node, LiveRelay(node.hub, node.store), session_id, events)
    await c.wait_for("event", seq=top)
    deltas: defaultdict[str, str] = defaultdict(str)
    for d in c.of("delta"):
        assert d["kind"] in ("delta:text", "delta:reasoning") and d["assistant_message_id"].startswith("msg_")
        deltas[d["part_id"]] += d["delta"]
    ends = {m["fields"]["part_id"]: m["fields"]["text"] for m in c.of("event") if m["kind"] in ("text:end",
                                                                                                 "reasoning:end")}
    assert deltas and set(deltas) <= set(ends)
    assert all(ends[part] == joined for part, joined in deltas.items())
    after = [d["after_seq"] for d in c.of("delta")]
    assert after == sorted(after) and after[-1] < top
    assert c.seqs() == sorted({e.seq for e in events if e.seq is not None})  # every stored row, once, in order
    if name == "x2-legacy-reasoning":
        assert {d["kind"] for d in c.of("delta")} == {"delta:text", "delta:reasoning"}


async def test_legacy_event_frames_carry_the_fields_a_v2_client_reads(node: Node, clients: list[WsClient]) -> None:
    session_id, events = legacy_session("x1-legacy-tool-turn")
    top = max(e.seq or 0 for e in events)
    c = await subscribed(clients, node, session_id)
    await drive(node, LiveRelay(node.hub, node.store), session_id, events)
    await c.wait_for("event", seq=top)
    later = await subscribed(clients, node, session_id)  # replay gives the same frames as live
    assert later.of("event") == c.of("event")
    by_kind: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in c.of("event"):
        by_kind[m["kind"]].append(m["fields"])
    assert [f["text"] for f in by_kind["prompt:admitted"]] == [e.text for e in events if e.kind == "prompt:admitted"]
    assert [f["input"] for f in by_kind["tool:start"]] == [
        {"command": "echo hi", "description": "Print hi"}, {"path": "hello.txt"}, {"filePath": "hello.txt"}]
    (bash,) = [f for f in by_kind["tool:success"] if f["tool_name"] == "bash"]
    assert bash["output_text"] == "hi\n" and bash["duration_ms"] == 135
    (failed,) = by_kind["tool:fail"]
    assert "error_type" not in failed and "invalid arguments" in failed["error_message"]
    assert all(f["tokens_input"] == 100 and f["tokens_output"] == 10 and f["cost"] == 0 and f["finish"]
               for f in by_kind["step:end"])
    assert all(f["agent"] == "build" and f["model_id"] == "mock-1" for f in by_kind["step:start"])
    for resend in by_kind["legacy:part-updated"] + by_kind["legacy:message-updated"]:
        assert not {"text", "output_text", "tokens_input", "error_message"} & set(resend)


async def test_a_legacy_permission_request_reaches_the_client_and_its_answer_is_shown(
    node: Node, clients: list[WsClient], engine: AsyncEngine
) -> None:
    session_id, events = legacy_session("x5-legacy-permission")
    relay = LiveRelay(node.hub, node.store)
    c = await subscribed(clients, node, session_id)
    rest = await drive(node, relay, session_id, events, until=lambda e: e.kind == "permission:asked")
    asked = await c.wait_for("permission", state="asked")
    tool_start = next(e for e in events if e.kind == "tool:start")
    assert (asked["action"], asked["call_id"], asked["runtime"]) == ("bash", tool_start.call_id, "legacy")
    assert asked["assistant_message_id"] == tool_start.assistant_message_id and asked["resources"]
    async with engine.connect() as conn:
        row = (await conn.execute(text("SELECT runtime, reply FROM chat_permission_requests "
                                       "WHERE request_id = :r"), {"r": asked["request_id"]})).one()
    assert tuple(row) == ("legacy", None)

    later = await subscribed(clients, node, session_id)  # a page opened later sees the pending request
    pending = await later.wait_for("permission", request_id=asked["request_id"])
    assert {k: pending[k] for k in ("state", "action", "call_id", "runtime", "resources")} == {
        k: asked[k] for k in ("state", "action", "call_id", "runtime", "resources")}

    class NoV2Requests:  # the v2 per-session list never holds a legacy request (docs/upstream.md §16)
        async def pending_permissions(self, sid: str) -> list[dict[str, Any]]:
            return []

    await PermissionResync(node.hub, node.store, relay, NoV2Requests()).sync(session_id)  # type: ignore[arg-type]
    assert (await node.store.permission_replies(session_id)) == {asked["request_id"]: None}  # still pending

    await drive(node, relay, session_id, rest)
    replied = await c.wait_for("permission", state="replied")
    assert (replied["request_id"], replied["reply"], replied["runtime"]) == (asked["request_id"], "once", "legacy")
    await later.wait_for("permission", state="replied")
