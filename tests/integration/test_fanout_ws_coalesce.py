"""Send coalescing on the real socket (bridge.http.ws_send): a reader that keeps up and one that stalls get
every frame whole and in order, in far fewer socket writes than frames; a client that negotiated
permessage-deflate keeps aiohttp's per-frame path. The slow-consumer cut-off (4429) under coalescing:
tests/integration/test_fanout_ws.py, test_a_slow_client_is_closed_with_4429_while_a_normal_client_misses_nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.fanout import metrics
from bridge.fanout.queue import QueueLimits
from bridge.store.db import make_engine
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import Node

SID = "ses_coalesce_a"
STORED, LIVE = 1500, 300


@pytest.fixture
async def node(engine: AsyncEngine, database_url: str) -> AsyncIterator[Node]:
    eng = make_engine(database_url)
    n = Node(eng, database_url, limits=QueueLimits(max_messages=400, max_bytes=1024 * 1024))
    await n.start()
    yield n
    await n.stop()
    await eng.dispose()


def _counts() -> tuple[float, float]:
    return metrics.WS_FRAMES_SENT._value.get(), metrics.WS_SOCKET_WRITES._value.get()


async def _write(node: Node, first: int, last: int) -> None:
    for s in range(first, last + 1, 100):
        await node.write_seqs(SID, *range(s, min(s + 100, last + 1)), text_size=300)


async def test_a_fast_and_a_stalled_reader_get_every_frame_in_order_in_fewer_writes(
    node: Node, clients: list[WsClient]
) -> None:
    await _write(node, 1, STORED)
    fast = await WsClient.connect(node.url, node.token())
    stalled = await WsClient.connect(node.url, node.token(), read=False)  # reads nothing for now
    clients += [fast, stalled]
    frames0, writes0 = _counts()
    await fast.subscribe(SID, id="f")
    await stalled.subscribe(SID, id="s")
    await fast.wait_for("caught_up", timeout=60)
    await _write(node, STORED + 1, STORED + LIVE)  # live, while the stalled reader's replay waits for room
    await fast.wait_for("event", seq=STORED + LIVE, timeout=60)
    stalled.start_reading()
    await stalled.wait_for("event", seq=STORED + LIVE, timeout=60)
    everything = list(range(1, STORED + LIVE + 1))
    for c in (fast, stalled):
        assert c.seqs(SID) == everything  # whole frames, in order, none twice
        assert [m["type"] for m in c.messages[:2]] == ["hello", "subscribed"]
        assert c.of("caught_up")[0]["seq"] >= STORED
        assert c.close_code is None and not c.ws.closed
    frames1, writes1 = _counts()
    frames, writes = frames1 - frames0, writes1 - writes0
    assert frames >= 2 * (STORED + LIVE)
    assert writes * 4 < frames, (frames, writes)  # the replay's frames went out many per write


async def test_a_client_with_permessage_deflate_gets_every_frame_compressed_in_order(
    node: Node, clients: list[WsClient]
) -> None:
    await _write(node, 1, 400)
    http = aiohttp.ClientSession()
    try:
        ws = await http.ws_connect(f"{node.url}/v1/ws?token={node.token()}", compress=15)
    except BaseException:
        await http.close()
        raise
    c = WsClient(http, ws)
    clients.append(c)
    c.start_reading()
    assert ws.compress == 15  # negotiated: the bridge sends deflated messages
    frames0, writes0 = _counts()
    await c.subscribe(SID)
    await c.wait_for("caught_up", timeout=60)
    await _write(node, 401, 450)
    await c.wait_for("event", seq=450, timeout=60)
    assert c.seqs(SID) == list(range(1, 451))
    frames, writes = (a - b for a, b in zip(_counts(), (frames0, writes0), strict=True))
    assert writes == frames  # aiohttp's per-frame path: its deflate context advances message by message


