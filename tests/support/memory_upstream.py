"""The serve model behind `MockTransport` with scripted streams (`MemoryUpstream`, no sockets), and an
in-memory `EventSink` (`MemorySink`).

`MemoryUpstream` is the model's MockTransport adapter (tests/support/serve_model/model_transport.py) whose
`/history` and `POST /sync/history` answer from the model (`history[sid]`: a session's durable events,
`sync[sid]`: its sync log; a session without a log has an empty one), while the durable and live streams
(`/api/event` and `/global/event` alike) are the queues the test feeds (`push_durable`, `push_live`,
`end_*`): one pushed chunk is one read. For unit tests that script single reads; the model's own streams
are model_transport.py's, and on a socket fake_upstream.py's.
`MemorySink` stores what the follower writes, like the store would (cursor = highest seq written).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote

import yarl

from bridge.errors import LeaseLost
from bridge.events import ChatEvent
from bridge.upstream.transport import Request, Response, bytes_body
from tests.support.serve_model import FakeSession, FaultPlan, ServeModel
from tests.support.serve_model.frames import sync_item
from tests.support.serve_model.model_transport import ModelTransport, answer

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


class SessionLogs(MutableMapping[str, list[dict[str, Any]]]):
    """A view of the model's sessions as `sid -> list`: their durable events (`/history`) or their sync logs.
    A session with a sync log but no events list is, to the serve, a deleted one: gone from every route,
    its log still answered (docs/upstream.md §14)."""

    def __init__(self, model: ServeModel, field_name: str) -> None:
        self.model, self.field = model, field_name

    def _held(self) -> dict[str, FakeSession]:
        return {sid: s for sid, s in self.model.sessions.items() if self.field == "log" or not s.deleted}

    def __getitem__(self, sid: str) -> list[dict[str, Any]]:
        s = self._held()[sid]
        return s.events if self.field == "events" else s.log

    def __setitem__(self, sid: str, items: list[dict[str, Any]]) -> None:
        s = self.model.sessions.get(sid)
        if s is None:
            s = self.model.add_session(sid)
            s.deleted = self.field == "log"
        if self.field == "events":
            s.events, s.deleted = items, False
        else:
            s.log = items

    def __delitem__(self, sid: str) -> None:
        raise NotImplementedError("a session's log is not taken back")

    def __iter__(self) -> Iterator[str]:
        return iter(self._held())

    def __len__(self) -> int:
        return len(self._held())


class MemoryUpstream(ModelTransport):
    """The serve model behind `MockTransport` (model_transport.py) with scripted streams: `history` (sid ->
    its durable events) and `sync` (sid -> its sync log) are views of the model; `has_more` forces a
    page's `hasMore`; `raw_history` serves a body as is."""

    def __init__(self, history: dict[str, list[dict[str, Any]]] | None = None,
                 sync: dict[str, list[dict[str, Any]]] | None = None, *,
                 has_more: Callable[[str, int], bool | None] = lambda _sid, _after: None,
                 faults: FaultPlan | None = None, raw_history: dict[str, bytes] | None = None) -> None:
        super().__init__(ServeModel())
        self.model.faults = faults or FaultPlan()
        self.history, self.sync = SessionLogs(self.model, "events"), SessionLogs(self.model, "log")
        self.history.update(history or {})
        self.sync.update(sync or {})
        self.has_more, self.raw_history = has_more, dict(raw_history or {})
        self._durable: dict[str, asyncio.Queue[bytes | None]] = {}
        self._live: asyncio.Queue[bytes | None] = asyncio.Queue()

    @property
    def fail_status(self) -> dict[str, int]:
        return self.model.faults.fail_status

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
        """The model's answers, but the streams are the test's script (one pushed chunk = one read)."""
        url = yarl.URL(request.url, encoded=True)
        parts = url.raw_path.split("/")
        if url.raw_path in ("/api/event", "/global/event"):
            return Response(200, {}, _drain(self._live))
        if len(parts) == 5 and parts[:3] == ["", "api", "session"] and parts[4] in ("event", "history"):
            sid, route = unquote(parts[3]), parts[4]
            if (failed := self.model.faults.failure("durable" if route == "event" else route)) is not None:
                return answer(failed)
            if route == "event":
                return Response(200, {}, _drain(self.durable_queue(sid)))
            if sid in self.raw_history:
                return Response(200, {}, bytes_body(self.raw_history[sid]))
            forced = self.has_more(sid, int(url.query["after"]))
            if forced is not None and sid in self.history:
                page, _ = self.model.history(self.model.sessions[sid], int(url.query["after"]),
                                             int(url.query["limit"]))
                return json_response(200, {"data": page, "hasMore": forced})
        return await super().handle(request)


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
