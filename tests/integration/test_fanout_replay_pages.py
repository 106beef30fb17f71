"""A replay of many pages, each read while the one before it is sent (bridge.fanout.connection: one page read
ahead), on real PostgreSQL and a real socket: pages of 7 events, writes racing the subscribes, subscribers
from several `after`s, legacy rows among v2 rows, and a subscriber that leaves in the middle of its replay."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp

from tests.support.fanout_client import WsClient
from tests.support.fanout_node import Node
from tests.support.legacy_rows import legacy_session
from tests.support.waiting import wait_until

SID = "ses_pages_a"
PAGE = 7


async def paged_node(nodes: Callable[..., Any]) -> Node:
    node: Node = await nodes(own_pool=True)
    node.service.replay_page = PAGE  # before any subscribe: the shared reads are made on first use
    return node


async def connect(clients: list[WsClient], node: Node) -> WsClient:
    c = await WsClient.connect(node.url, node.token())
    clients.append(c)
    return c


async def test_every_page_arrives_once_in_order_while_writes_race_the_subscribes(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node = await paged_node(nodes)
    await node.write_seqs(SID, *range(1, 51))
    later = [s for s in range(51, 251) if s % 3]  # seqs with holes, as legacy turns leave them

    async def writer() -> None:
        for i in range(0, len(later), 5):
            await node.write_seqs(SID, *later[i:i + 5])
            await asyncio.sleep(0)

    afters = [None, 0, 6, 7, 13, 49]
    subscribers = [await connect(clients, node) for _ in afters]
    write_task = asyncio.create_task(writer())
    for c, after in zip(subscribers, afters, strict=True):
        await c.subscribe(SID, after)
    await write_task
    everything = [*range(1, 51), *later]
    for c, after in zip(subscribers, afters, strict=True):
        await c.wait_for("event", seq=everything[-1])
        assert c.seqs(SID) == [s for s in everything if after is None or s > after]
        caught_up = await c.wait_for("caught_up", session=SID)
        assert caught_up["seq"] >= 50


async def test_legacy_rows_replay_over_pages_as_they_were_stored(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node = await paged_node(nodes)
    sid, events = legacy_session("x1-legacy-tool-turn")
    events = [e for e in events if e.seq is not None]
    await node.write(sid, events)
    c = await connect(clients, node)
    await c.subscribe(sid)
    await c.wait_for("caught_up", session=sid)
    got = c.of("event", sid)
    assert [m["seq"] for m in got] == sorted({e.seq or 0 for e in events})
    assert [m["kind"] for m in got] == [str(e.kind) for e in sorted(events, key=lambda e: e.seq or 0)]


async def test_a_client_leaving_mid_replay_leaves_no_read_behind(
    nodes: Callable[..., Any], clients: list[WsClient]
) -> None:
    node = await paged_node(nodes)
    await node.write_seqs(SID, *range(1, 2001), text_size=5000)  # 10 MB: more than the socket buffers hold
    reads = node.service.reads
    async with aiohttp.ClientSession() as http, http.ws_connect(f"{node.url}/v1/ws?token={node.token()}") as ws:
        await ws.receive()  # hello
        await ws.send_str(json.dumps({"op": "subscribe", "session": SID}))
        seen = [json.loads((await ws.receive()).data)["type"] for _ in range(3)]
        assert seen == ["subscribed", "event", "event"]  # and it stops reading: the replay waits for room
        await wait_until(lambda: node.service.hub.subscriber_count(SID) == 1, 10, 0.02, message="subscribed")
    # Gone mid-replay: its subscription ends, and the page read ahead for it does not outlive it.
    await wait_until(lambda: not node.service.hub.has_subscribers(SID), 10, 0.02, message="unsubscribed")
    await wait_until(lambda: not reads._running, 10, 0.02, message="page reads still running")
    other = await connect(clients, node)
    await other.subscribe(SID, 1990)
    await other.wait_for("caught_up", session=SID)
    assert other.seqs(SID) == list(range(1991, 2001))
