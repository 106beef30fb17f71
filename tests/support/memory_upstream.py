"""An in-memory `opencode serve` behind a `MockTransport` (no sockets), and an in-memory `EventSink`.

`MemoryUpstream` answers `/history` pages from its event lists, `POST /sync/history` from its sync logs
(`sync[sid]`, a list of sync items; a session without one has an empty log) and serves the durable and
live streams (`/api/event` and `/global/event` alike) from queues the test feeds (`push_durable`,
`push_live`, `end_*`): one pushed chunk is one read.
`MemorySink` stores what the follower writes, like the store would (cursor = highest seq written).

Beside the fake upstream on a real socket (fake_upstream.py, which integration, hostile, e2e and bench use) this
one serves the unit tests that need to script single reads (one pushed chunk = one read) and no socket; both
answer through the serve model's rules, frames and fault plan (tests/support/serve_model/).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote

import yarl

from bridge.errors import LeaseLost
from bridge.events import ChatEvent
from bridge.upstream.client import UpstreamClient
from bridge.upstream.transport import MockTransport, Request, Response, bytes_body
from tests.support.serve_model import FaultPlan
from tests.support.serve_model.frames import Answer, session_not_found, sync_item
from tests.support.serve_model.rules import history_page, items_after, sync_answer

__all__ = ["MemorySink", "MemoryUpstream", "envelope", "json_response", "sse", "sync_item"]


def envelope(sid: str, seq: int, type_: str = "session.next.text.started", *, aggregate: str | None = None,
             **data: Any) -> dict[str, Any]:
    return {"id": f"evt_{sid}_{seq}", "type": type_,
            "durable": {"aggregateID": aggregate or sid, "seq": seq, "version": 1},
            "data": {"sessionID": sid, "timestamp": 1796004921000 + seq, **data}}


def sse(*envelopes: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in envelopes)


def json_response(status: int, body: object, headers: dict[str, str] | None = None) -> Response:
    raw = json.dumps(body).encode()
    return Response(status, {"Content-Type": "application/json", **(headers or {})}, bytes_body(raw))


def answer(a: Answer) -> Response:
    return json_response(*a)


@dataclass
class MemoryUpstream:
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    has_more: Callable[[str, int], bool | None] = lambda _sid, _after: None  # None: computed
    faults: FaultPlan = field(default_factory=FaultPlan)  # its routes: "history", "durable", "sync"
    raw_history: dict[str, bytes] = field(default_factory=dict)  # sid -> a body served as is
    sync: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # sid -> its sync log
    _durable: dict[str, asyncio.Queue[bytes | None]] = field(default_factory=dict)
    _live: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)

    def __post_init__(self) -> None:
        self.transport = MockTransport(self.handle)

    @property
    def fail_status(self) -> dict[str, int]:
        return self.faults.fail_status

    def client(self, **kw: Any) -> UpstreamClient:
        return UpstreamClient("http://upstream.test", transport=self.transport, **kw)

    @property
    def paths(self) -> list[str]:
        return [r.path for r in self.transport.requests]

    def durable_queue(self, sid: str) -> asyncio.Queue[bytes | None]:
        return self._durable.setdefault(sid, asyncio.Queue())

    def push_durable(self, sid: str, chunk: bytes) -> None:
        self.durable_queue(sid).put_nowait(chunk)

    def end_durable(self, sid: str) -> None:
        self.durable_queue(sid).put_nowait(None)

    def push_live(self, chunk: bytes) -> None:
        self._live.put_nowait(chunk)

    def end_live(self) -> None:
        self._live.put_nowait(None)

    async def handle(self, request: Request) -> Response:
        url = yarl.URL(request.url, encoded=True)
        parts = url.raw_path.split("/")
        if url.raw_path in ("/api/event", "/global/event"):
            return Response(200, {}, _drain(self._live))
        if url.raw_path == "/sync/history" and request.body is not None:
            if (failed := self.faults.failure("sync")) is not None:
                return answer(failed)
            return json_response(200, sync_answer(self.sync, json.loads(request.body), items_after))
        if len(parts) == 5 and parts[:3] == ["", "api", "session"]:
            sid, route = unquote(parts[3]), parts[4]
            name = "durable" if route == "event" else route
            if (failed := self.faults.failure(name)) is not None:
                return answer(failed)
            if route == "history":
                return self._history(sid, int(url.query["after"]), int(url.query["limit"]))
            if route == "event":
                return Response(200, {}, _drain(self.durable_queue(sid)))
        return json_response(404, {"_tag": "NotFound", "message": url.raw_path})

    def _history(self, sid: str, after: int, limit: int) -> Response:
        if sid in self.raw_history:
            return Response(200, {}, bytes_body(self.raw_history[sid]))
        if sid not in self.history:
            return answer(session_not_found(sid))
        page, more = history_page([e for e in self.history[sid] if e["durable"]["seq"] > after], limit)
        forced = self.has_more(sid, after)
        return json_response(200, {"data": page, "hasMore": more if forced is None else forced})


async def _drain(queue: asyncio.Queue[bytes | None]) -> AsyncIterator[bytes]:
    while (chunk := await queue.get()) is not None:
        yield chunk


@dataclass
class MemorySink:
    """Stores events by seq; the cursor is the highest seq written. `lease_lost` fences every write."""

    events: dict[int, ChatEvent] = field(default_factory=dict)
    rejects: list[tuple[str, int | None]] = field(default_factory=list)
    lease_lost: bool = False
    writes: int = 0

    @property
    def cursor(self) -> int:
        return max(self.events, default=0)

    async def write(self, events: Sequence[ChatEvent], received_at: datetime) -> int:
        if self.lease_lost:
            raise LeaseLost("fenced (test)")
        self.writes += 1
        for ev in events:
            assert ev.seq is not None
            self.events.setdefault(ev.seq, ev)
        return self.cursor

    async def reject(self, reason: str, raw: str, received_at: datetime, seq: int | None = None) -> None:
        self.rejects.append((reason, seq))
