"""The bridge's measured phases of bench.write_path, on the store as followers drive it: the frames (the
captured tool-turn events retargeted to a session), a burst of all sessions at once, the store's own share,
the catch-up from `/history` items, one long session's catch-up in pages, the quiet-session commit latency
and the replay of one long session (store read + event frames)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bridge import metrics
from bridge.events import ChatEvent, normalize, parse_envelope, parse_frame
from bridge.fanout import protocol as p
from bridge.fanout.connection import WebSocketContext
from bridge.perf import turnstile
from bridge.store.reads import FanoutStore
from bridge.store.writes import EventStore
from bridge.upstream.responses import decode_json
from bridge.upstream.store_sink import StoreSink

TEMPLATE = Path("fixtures/opencode-1.18.33/b-tool-turn/durable.sse")
READ = 20  # events per follower read (one write() call)


def _templates() -> list[dict[str, Any]]:
    lines = TEMPLATE.read_text().splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: ")]


def frames(sid: str, n: int, start: int = 1) -> list[str]:
    """n wire frames (`data:` text) of session `sid`, seqs start..start+n-1, unique ids."""
    tpl = _templates()
    out = []
    for i in range(n):
        seq = start + i
        env = json.loads(json.dumps(tpl[i % len(tpl)]))
        env["id"] = f"evt_{sid[4:]}_{seq:07d}"
        env["durable"] = {"aggregateID": sid, "seq": seq, "version": env["durable"]["version"]}
        env["data"]["sessionID"] = sid
        out.append(json.dumps(env, separators=(",", ":"), ensure_ascii=False))
    return out


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


Writer = Callable[[str, int], Callable[[Sequence[ChatEvent], datetime], Awaitable[int]]]


def writer(store: EventStore) -> Writer:
    def bind(sid: str, epoch: int) -> Callable[[Sequence[ChatEvent], datetime], Awaitable[int]]:
        return StoreSink(store, sid, epoch).write
    return bind


async def _claim_all(store: EventStore, sids: Sequence[str]) -> dict[str, int]:
    out = {}
    for sid in sids:
        out[sid], _ = await store.claim(sid, "bench")
    return out


async def _timed(coros: list[Awaitable[Any]], events: int) -> dict[str, float]:
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*coros)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"events_per_s": events / wall, "cpu_us_per_event": cpu / events * 1e6, "wall_s": wall}


async def burst(store: EventStore, write: Writer, tag: str, sessions: int, n: int) -> dict[str, float]:
    sids = [f"ses_{tag}{k:05d}" for k in range(sessions)]
    epochs = await _claim_all(store, sids)
    wire = {sid: frames(sid, n) for sid in sids}
    gate = turnstile.Turnstile()  # one for all the followers, as the daemon has it

    async def follower(sid: str) -> None:
        w = write(sid, epochs[sid])
        for read in chunks(wire[sid], READ):
            await gate.enter()  # as the follower does before a read's CPU work
            received = datetime.now(UTC)
            await w([normalize(parse_frame(f)) for f in read], received)

    return await _timed([follower(sid) for sid in sids], sessions * n)


async def store_only(store: EventStore, tag: str, sessions: int, n: int) -> dict[str, float]:
    """The burst's rows prepared beforehand and handed to the group committer at once: what the store's
    transaction (locks, anchors, COPY, link check, cursors) costs without the parsing in front of it."""
    sids = [f"ses_{tag}{k:05d}" for k in range(sessions)]
    epochs = await _claim_all(store, sids)
    now = datetime.now(UTC)
    writes = [store.prepare(sid, epochs[sid], [normalize(parse_frame(f)) for f in frames(sid, n)], now)
              for sid in sids]
    committer = store.committer
    assert committer is not None
    return await _timed([committer.submit(w) for w in writes], sessions * n)


def rows_by_path() -> dict[str, float]:
    return {path: metrics.REGISTRY.get_sample_value("bridge_group_commit_rows_total", {"path": path}) or 0.0
            for path in ("copy", "insert")}


async def catch_up(store: EventStore, write: Writer, tag: str, sessions: int, n: int) -> dict[str, float]:
    """S sessions' `/history` pages (a JSON body per page, decoded like the client does)."""
    sids = [f"ses_{tag}{k:05d}" for k in range(sessions)]
    epochs = await _claim_all(store, sids)
    pages = {sid: [f'{{"events":[{",".join(page)}],"hasMore":false}}'.encode() for page in chunks(frames(sid, n), 100)]
             for sid in sids}
    gate = turnstile.Turnstile()

    async def follower(sid: str) -> None:
        w = write(sid, epochs[sid])
        for page in pages[sid]:
            body = decode_json(page)
            await gate.enter()  # as the catch-up does before a page's CPU work
            received = datetime.now(UTC)
            await w([normalize(parse_envelope(item)) for item in body["events"]], received)

    return await _timed([follower(sid) for sid in sids], sessions * n)


async def long_catch_up(store: EventStore, write: Writer, n: int, page: int, in_flight: int) -> dict[str, float]:
    """One session's history of n events in pages; `in_flight` pages written concurrently (1 = today's
    follower: fetch, write, wait, fetch…; 2 = the next page parsed while the previous one commits)."""
    sid = f"ses_long{in_flight}_{uuid.uuid4().hex[:6]}"
    (epoch,) = (await _claim_all(store, [sid])).values()
    w = write(sid, epoch)
    pages = chunks(frames(sid, n), page)
    sem = asyncio.Semaphore(in_flight)
    prev: asyncio.Future[Any] | None = None

    async def one(fs: Sequence[str], before: asyncio.Future[Any] | None) -> None:
        async with sem:
            events = [normalize(parse_frame(f)) for f in fs]
            if before is not None and in_flight == 1:
                await before
            await w(events, datetime.now(UTC))

    cpu0, t0 = time.process_time(), time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for fs in pages:
            prev = tg.create_task(one(fs, prev))
            if in_flight == 1:
                await prev
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"events_per_s": n / wall, "cpu_us_per_event": cpu / n * 1e6, "session": sid}  # type: ignore[dict-item]


async def quiet_latency(store: EventStore, write: Writer, count: int) -> dict[str, float]:
    sid = f"ses_quiet_{uuid.uuid4().hex[:6]}"
    (epoch,) = (await _claim_all(store, [sid])).values()
    w = write(sid, epoch)
    lat = []
    for f in frames(sid, count):
        ev = [normalize(parse_frame(f))]
        t0 = time.perf_counter()
        await w(ev, datetime.now(UTC))
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    return {"p50_ms": statistics.median(lat), "p99_ms": lat[max(0, int(len(lat) * 0.99) - 1)]}


async def replay(engine: Any, upstream: str, sid: str, n: int, page: int = WebSocketContext.replay_page,
                 python: bool = False) -> dict[str, float]:
    """What a WebSocket replay does per event minus the socket: read pages of frames (PostgreSQL builds a
    v2 row's, bridge.store.reads.replay) — or, `python`, of stored rows to frame here (`event_frames`)."""
    fan = FanoutStore(engine, upstream)
    sent, after = 0, 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    while True:
        if python:
            rows: Any = await fan.events_after(sid, after, page)
            frames = p.event_frames(sid, rows)
        else:
            rows = await fan.frames_after(sid, after, page)
            frames = p.replay_frames(sid, rows)
        for seq, _frame in frames:
            sent += 1
            after = seq
        if len(rows) < page:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert sent == n, (sent, n)
    return {"events_per_s": n / wall, "cpu_us_per_event": cpu / n * 1e6}
