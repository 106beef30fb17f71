"""Resource attacks: idle sockets, connection floods, abandoned requests, bursts of heavy reads, slow
queries. Each bound answers with a clear refusal instead of starving something else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.http.server import KEEPALIVE_TIMEOUT_S, make_runner
from bridge.store.db import make_read_engine
from bridge.store.reads import AuditReader
from bridge.store.writes import EventStore
from tests.support.chat_events import RECEIVED_AT, chat_event
from tests.support.fanout_node import UPSTREAM
from tests.support.waiting import wait_until

from .conftest import bearer


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Any]]:
    runners: list[web.AppRunner] = []

    async def start(app: web.Application, **kw: Any) -> int:
        runner = make_runner(app, **kw)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return int(runner.addresses[0][1])

    yield start
    for r in runners:
        await r.cleanup()


async def _hello(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def _get(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    return reader, writer


async def test_connections_beyond_the_cap_get_503_and_are_closed(serve: Callable[..., Any]) -> None:
    release = asyncio.Event()
    entered: list[int] = []

    async def busy(request: web.Request) -> web.Response:
        entered.append(1)
        await release.wait()
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/", busy)
    port = await serve(app, max_connections=2)
    held = [await _get(port) for _ in range(2)]  # both are handling a request: busy, never evicted
    await wait_until(lambda: len(entered) == 2, 10, 0.01, message="both requests in their handler")
    reader, writer = await _get(port)
    answer = await asyncio.wait_for(reader.read(), 10)  # read() to EOF: the bridge closed it
    assert answer.startswith(b"HTTP/1.1 503") and b"too_many_connections" in answer
    writer.close()
    release.set()
    for r, _ in held:
        assert b"200 OK" in await r.readuntil(b"\r\n")
    held[0][1].close()

    async def admitted() -> bool:
        r, w = await _get(port)
        line = await asyncio.wait_for(r.readuntil(b"\r\n"), 10)
        w.close()
        return b"200 OK" in line

    await wait_until(admitted, 10, 0.05, message="a connection admitted once one closed")
    held[1][1].close()


async def test_at_the_cap_a_newcomer_takes_the_place_of_the_oldest_idle_connection(serve: Callable[..., Any]) -> None:
    app = web.Application()
    app.router.add_get("/", _hello)
    port = await serve(app, max_connections=2)
    held = [await _get(port) for _ in range(2)]
    for reader, _ in held:  # answered, kept alive (HTTP/1.1): idle now
        assert b"200 OK" in await reader.readuntil(b"\r\n")
    reader, writer = await _get(port)
    assert b"200 OK" in await asyncio.wait_for(reader.readuntil(b"\r\n"), 10)
    await asyncio.wait_for(held[0][0].read(), 10)  # the oldest idle one: closed (read() returns at EOF)
    assert held[0][0].at_eof() and not held[1][0].at_eof()
    for _, w in (*held, (reader, writer)):
        w.close()


async def test_an_idle_connection_is_closed_after_the_keepalive_timeout(serve: Callable[..., Any]) -> None:
    assert KEEPALIVE_TIMEOUT_S == 75.0  # aiohttp's own default is 3630 s
    app = web.Application()
    app.router.add_get("/", _hello)
    port = await serve(app, max_connections=10, keepalive_timeout_s=0.3)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)  # never sends a request
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the bridge, not by us
    writer.close()


async def test_a_handler_whose_client_left_is_cancelled(serve: Callable[..., Any]) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        started.set()
        try:
            await asyncio.Event().wait()  # a heavy read that never finishes on its own
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    app = web.Application()
    app.router.add_get("/", slow)
    port = await serve(app, max_connections=10)
    _, writer = await _get(port)
    await asyncio.wait_for(started.wait(), 10)
    writer.close()
    await asyncio.wait_for(cancelled.wait(), 10)


async def _mirror(store: EventStore, sid: str, n: int) -> None:
    epoch, _ = await store.claim(sid, "owner-1")
    events = [chat_event(i, session_id=sid) for i in range(1, n + 1)]
    for i in range(0, n, 200):
        await store.write_batch(sid, epoch, events[i : i + 200], RECEIVED_AT)


class _GatedReader(AuditReader):
    """Transcript reads that wait until released: a heavy read in flight, on demand."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine, UPSTREAM)
        self.gate = asyncio.Event()
        self.inside = 0

    async def transcript_rows(self, session_id: str, after: int, limit: int,
                              page: int = 500) -> AsyncIterator[dict[str, Any]]:
        self.inside += 1
        await self.gate.wait()
        async for r in super().transcript_rows(session_id, after, limit, page):
            yield r


async def test_a_burst_of_heavy_reads_beyond_the_route_limit_gets_503_busy_at_once(
    audit_api: Callable[..., Any], engine: AsyncEngine, store: EventStore
) -> None:
    await _mirror(store, "ses_heavy", 5)
    reader = _GatedReader(engine)
    api: TestClient[Any, Any] = await audit_api(reader=reader, concurrency={"transcript": 2})
    url = "/v1/sessions/ses_heavy/transcript"
    inflight = [asyncio.create_task(api.get(url, headers=bearer())) for _ in range(2)]
    await wait_until(lambda: reader.inside == 2, 10, 0.01, message="two transcripts in flight")
    r = await api.get(url, headers=bearer())
    assert r.status == 503 and r.headers["Retry-After"] == "1"
    assert (await r.json())["error"]["code"] == "busy"
    assert (await api.get("/v1/sessions/ses_heavy", headers=bearer())).status == 200  # other routes go on
    reader.gate.set()
    for t in inflight:
        assert (await t).status == 200


async def test_a_read_over_the_statement_timeout_or_the_pool_is_503_not_a_hang_or_500(
    audit_api: Callable[..., Any], database_url: str
) -> None:
    read = make_read_engine(database_url, pool_size=1, statement_timeout_s=0.2)

    class SlowReader(AuditReader):
        async def session(self, session_id: str) -> dict[str, Any] | None:
            async with self._engine.connect() as conn:
                await conn.execute(text("SELECT pg_sleep(30)"))
            return None

    try:
        api: TestClient[Any, Any] = await audit_api(reader=SlowReader(read, UPSTREAM))
        r = await asyncio.wait_for(api.get("/v1/sessions/ses_x", headers=bearer()), 20)
        assert r.status == 503 and (await r.json())["error"]["code"] == "unavailable"
        async with read.connect():  # the one read connection is taken: the next request waits at most
            r = await asyncio.wait_for(api.get("/v1/sessions/ses_x", headers=bearer()), 20)  # the acquire
            assert r.status == 503  # timeout, then 503
    finally:
        await read.dispose()


async def test_the_read_pool_is_read_only(database_url: str) -> None:
    read = make_read_engine(database_url)
    try:
        async with read.connect() as conn:
            with pytest.raises(Exception, match="read-only"):
                await conn.execute(text("DELETE FROM chat_sessions"))
    finally:
        await read.dispose()


async def test_the_tool_call_outcome_lookup_uses_the_call_id_index(engine: AsyncEngine, store: EventStore) -> None:
    await _mirror(store, "ses_calls", 3)
    async with engine.connect() as conn:
        await conn.execute(text("SET enable_seqscan = off"))
        plan = "\n".join(str(r[0]) for r in await conn.execute(text(
            "EXPLAIN SELECT * FROM audit_tool_calls WHERE upstream = 'it-upstream' LIMIT 100")))
        # the table is partitioned (docs/lifecycle.md, "Partitions"): the index is one per partition
        names = [str(n) for n in (await conn.execute(text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = CAST('ix_chat_session_events_call' AS regclass)"))).scalars()]
    assert names and any(f" {n} " in plan for n in names), (names, plan)
