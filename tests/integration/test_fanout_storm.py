"""Subscribe storms are served, not refused (docs/websocket.md §3 "Shared reads", §5): hundreds of clients
subscribing at once to a few sessions, on a read pool of 2 connections with a short acquire timeout, all
get their catch-up and every live event in order; one read serves a session's subscribers; a client that
floods is held to its share while the others complete."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.fanout.limits import ConnectionSlots
from bridge.metrics import REGISTRY
from bridge.store import db
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import Node
from tests.support.waiting import wait_until

SESSIONS = 30
CLIENTS = 300
STORED = 20  # events stored per session before the storm
LIVE = 5  # events written per session while the storm runs




def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
async def small_read_pool(database_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[AsyncEngine]:
    """The read pool at 2 connections with a 0.3 s acquire timeout: a storm of reads that each asked the
    pool for a connection would fail on it within a second."""
    monkeypatch.setattr(db, "READ_ACQUIRE_TIMEOUT_S", 0.3)
    engine = db.make_read_engine(database_url, pool_size=2)
    yield engine
    await engine.dispose()


def _sid(i: int) -> str:
    return f"ses_storm{i:03d}"


async def _storm_node(nodes: Callable[..., Any], read_engine: AsyncEngine, per_owner: int = 64) -> Node:
    node: Node = await nodes(read_engine=read_engine, read_slots=1)
    node.service.read_queue_per_owner = per_owner
    node.service.slots = ConnectionSlots(per_token=32, per_address=2000, total=2000)
    for i in range(SESSIONS):
        await node.write_seqs(_sid(i), *range(1, STORED + 1))
    return node


async def _connect(node: Node, n: int, clients: list[WsClient], token: str | None = None) -> list[WsClient]:
    made = await asyncio.gather(*(WsClient.connect(node.url, token or node.token()) for _ in range(n)))
    clients.extend(made)
    await asyncio.gather(*(c.wait_for("hello") for c in made))
    return list(made)


def _complete(c: WsClient, sid: str, last: int) -> bool:
    return bool(c.of("caught_up", sid)) and bool(c.seqs(sid)) and c.seqs(sid)[-1] >= last


async def test_300_clients_subscribing_at_once_on_a_pool_of_2_all_get_every_event_in_order_from_shared_reads(
    nodes: Callable[..., Any], clients: list[WsClient], small_read_pool: AsyncEngine
) -> None:
    node = await _storm_node(nodes, small_read_pool)
    storm = await _connect(node, CLIENTS, clients)
    reads0, hits0 = _sample("bridge_ws_shared_reads_total", read="page"), _sample(
        "bridge_ws_shared_read_hits_total", read="page")
    refused0 = _sample("bridge_ws_refused_total", reason="busy")

    async def live() -> None:  # commits race the subscribes: the replay-to-live seam is crossed everywhere
        for seq in range(STORED + 1, STORED + LIVE + 1):
            for i in range(SESSIONS):
                await node.write_seqs(_sid(i), seq)

    start = time.monotonic()
    await asyncio.gather(*(c.subscribe(_sid(k % SESSIONS), id=k) for k, c in enumerate(storm)), live())
    last = STORED + LIVE
    await wait_until(lambda: all(_complete(c, _sid(k % SESSIONS), last) for k, c in enumerate(storm)), 60, 0.05,
                     message="every client caught up with every event")
    took = time.monotonic() - start
    errors = [m for c in storm for m in c.of("error")]
    assert errors == []
    for k, c in enumerate(storm):
        assert c.seqs(_sid(k % SESSIONS)) == list(range(1, last + 1)), k  # all, in order, none twice
    reads = _sample("bridge_ws_shared_reads_total", read="page") - reads0
    hits = _sample("bridge_ws_shared_read_hits_total", read="page") - hits0
    print(f"\nstorm: {CLIENTS} clients, {SESSIONS} sessions, read pool 2: all complete in {took:.2f} s; "
          f"{reads:.0f} page reads, {hits:.0f} subscribers served by another's read")
    # One read serves a session's subscribers: far fewer page reads than subscribers (one each, without sharing).
    assert reads <= CLIENTS / 3 and hits >= CLIENTS / 2, (reads, hits)
    assert _sample("bridge_ws_refused_total", reason="busy") == refused0


async def test_a_flooding_client_is_held_to_its_share_while_the_others_complete(
    nodes: Callable[..., Any], clients: list[WsClient], small_read_pool: AsyncEngine
) -> None:
    node = await _storm_node(nodes, small_read_pool, per_owner=4)
    throttled0 = _sample("bridge_ws_read_queue_throttled_total")
    flood_token = node.token()
    flooders = await _connect(node, 20, clients, flood_token)  # one client: 20 sockets of one token
    others = await _connect(node, 100, clients)
    per_socket = 60
    for f in flooders:  # every subscribe written at once: each socket's ops queue up behind its reader
        for k in range(per_socket):
            await f.subscribe(_sid(k % SESSIONS), id=f"f{k}")
    start = time.monotonic()
    await asyncio.gather(*(c.subscribe(_sid(k % SESSIONS), id=k) for k, c in enumerate(others)))
    await wait_until(lambda: all(_complete(c, _sid(k % SESSIONS), STORED) for k, c in enumerate(others)), 60, 0.05,
                     message="every other client caught up")
    others_done = time.monotonic() - start
    flood_done_then = sum(len(f.of("caught_up")) for f in flooders)
    await wait_until(lambda: all(len(f.of("caught_up")) == per_socket for f in flooders), 120, 0.05,
                     message="the flooder's subscribes served in the end")
    flood_took = time.monotonic() - start
    print(f"\nflood: 100 clients complete in {others_done:.2f} s while the flooder had {flood_done_then} of "
          f"{20 * per_socket} subscribes served; all of its subscribes served after {flood_took:.2f} s")
    assert all(c.of("error") == [] for c in others)
    assert all(c.seqs(_sid(k % SESSIONS)) == list(range(1, STORED + 1)) for k, c in enumerate(others))
    # The flooder waited at its bound (its sockets' readers held: TCP backpressure) and was served, not refused.
    assert _sample("bridge_ws_read_queue_throttled_total") > throttled0
    assert flood_done_then < 20 * per_socket / 2, flood_done_then
    assert [m for f in flooders for m in f.of("error") if m["code"] != "rate_limited"] == []
