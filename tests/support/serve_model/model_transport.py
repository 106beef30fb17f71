"""The serve model behind the `MockTransport` seam of bridge/upstream/transport.py: no socket, the same
answers as the socket adapter (tests/support/fake_upstream.py) for the routes the bridge reads —
`/api/session`, `…/{id}`, `…/history`, `…/event` (durable: no answer until its first event, like the real
serve, docs/upstream.md §3.3), `…/permission`, `…/question`, `/session/{id}/todo`, `POST /sync/history`,
`/api/event` and `/global/event` (fed from the model's live streams).

What only a socket does (connections cut mid-body, requests held) stays with the socket adapter; here a
dropped stream (`drop_connections`) ends with `UpstreamUnavailable`, as the transport reports a cut body.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

import yarl

from bridge.errors import UpstreamUnavailable
from bridge.upstream.client import UpstreamClient
from bridge.upstream.transport import MockTransport, Request, Response, bytes_body
from tests.support.serve_model.frames import (
    LIVE_CONNECTED,
    Answer,
    dumps,
    global_server_frame,
    invalid_query,
    no_route,
    parse_after,
    session_not_found,
)
from tests.support.serve_model.model import DurableCursor, ServeModel, Stream
from tests.support.serve_model.reads import plain_read
from tests.support.serve_model.rules import check_sync_body

JSON = {"Content-Type": "application/json"}
SSE = {"Content-Type": "text/event-stream"}


def answer(a: Answer) -> Response:
    return Response(a[0], JSON, bytes_body(dumps(a[1]).encode()))


def ok(body: Any) -> Response:
    return answer((200, body))


class ModelTransport:
    def __init__(self, model: ServeModel) -> None:
        self.model = model
        self.transport = MockTransport(self.handle)
        self._generation = 0  # bumped by drop_connections(): the streams of older ones end with a cut

    def client(self, **kw: Any) -> UpstreamClient:
        return UpstreamClient("http://upstream.test", transport=self.transport, **kw)

    @property
    def paths(self) -> list[str]:
        return [r.path for r in self.transport.requests]

    def drop_connections(self) -> None:
        """Every open stream ends as a cut body (a killed server)."""
        self._generation += 1
        for q in self.model.live_streams + self.model.global_streams:
            q.put_nowait(b"")
        asyncio.get_running_loop().create_task(self.model.wake())

    async def handle(self, request: Request) -> Response:
        url = yarl.URL(request.url, encoded=True)
        m, parts = self.model, [unquote(p) for p in url.raw_path.split("/")[1:]]
        if request.method == "POST" and parts == ["sync", "history"]:
            return self._sync(request.body or b"")
        if parts == ["api", "event"]:
            return self._stream_or_fail(("live",), m.live_streams, LIVE_CONNECTED)
        if parts == ["global", "event"]:
            return self._stream_or_fail(("global", "live"), m.global_streams,
                                        global_server_frame(f"evt_gc{m.count()}"))
        if (read := _plain_route(parts)) is not None:
            return answer(plain_read(m, *read))
        if len(parts) == 4 and parts[:2] == ["api", "session"] and parts[3] in ("history", "event"):
            s = m.session(parts[2])
            if s is None:
                return answer(session_not_found(parts[2]))
            if (failed := m.faults.failure("durable" if parts[3] == "event" else "history")) is not None:
                return answer(failed)
            after, limit = parse_after(url.query.get("after", "")), parse_after(url.query.get("limit", "100"))
            if after is None or limit is None:
                return answer(invalid_query("after" if after is None else "limit"))
            if parts[3] == "event":
                return await self._durable(DurableCursor(s, after))
            page, more = m.history(s, after, limit)
            return ok({"data": page, "hasMore": more})
        return answer(no_route(url.raw_path))

    def _sync(self, raw: bytes) -> Response:
        if (failed := self.model.faults.failure("sync")) is not None:
            return answer(failed)
        if self.model.faults.drop_sync():
            raise UpstreamUnavailable("POST /sync/history: connection cut (fault plan)")
        asked = json.loads(raw)
        if (refused := check_sync_body(asked)) is not None:
            return answer(refused)
        return ok(self.model.sync(asked))

    async def _durable(self, cursor: DurableCursor) -> Response:
        generation = self._generation
        while not (first := cursor.take()):  # no status line until the first event (docs/upstream.md §3.3)
            await self.model.changed()
            if generation != self._generation:
                raise UpstreamUnavailable("durable stream: connection cut (fault plan)")
        cursor.sent()
        return Response(200, SSE, self._durable_body(cursor, first, generation))

    async def _durable_body(self, cursor: DurableCursor, first: bytes, generation: int) -> AsyncIterator[bytes]:
        yield first
        while True:  # read before waiting: what came while the reader was away is not lost
            if generation != self._generation:
                raise UpstreamUnavailable("durable stream: connection cut (fault plan)")
            if chunk := cursor.take():
                cursor.sent()
                yield chunk
            else:
                await self.model.changed()

    def _stream_or_fail(self, routes: tuple[str, ...], streams: list[Stream], first: bytes) -> Response:
        if (failed := self.model.faults.failure(*routes)) is not None:
            return answer(failed)
        q: Stream = asyncio.Queue()
        streams.append(q)
        return Response(200, SSE, _drain(q, streams, first))


async def _drain(q: Stream, streams: list[Stream], first: bytes) -> AsyncIterator[bytes]:
    try:
        yield first
        while (chunk := await q.get()) is not None:
            if chunk == b"":
                raise UpstreamUnavailable("live stream: connection cut (fault plan)")
            yield chunk
    finally:
        streams.remove(q)


def _plain_route(parts: list[str]) -> tuple[str, str | None] | None:
    """(the plain read, its session) of a path's segments (serve_model/reads.py), or None."""
    fixed = {("api", "health"): "health", ("api", "session"): "list", ("api", "session", "active"): "active",
             ("question",): "legacy_question", ("permission",): "legacy_permission"}
    if (route := fixed.get(tuple(parts))) is not None:
        return route, None
    if len(parts) == 3 and parts[:2] == ["api", "session"]:
        return "session", parts[2]
    if len(parts) == 4 and parts[:2] == ["api", "session"] and parts[3] in ("permission", "question"):
        return parts[3], parts[2]
    if len(parts) == 3 and parts[0] == "session" and parts[2] in ("todo", "diff"):
        return parts[2], parts[1]
    return None
