"""One model of an `opencode serve` 1.18.33, as the bridge reads it (docs/upstream.md §3, §14, §15):
sessions with their durable events and sync logs, the seq each takes, the pending requests, the live
streams' subscribers, and a fault plan. The adapters (fake_upstream.py on a socket, model_transport.py
behind `MockTransport`) only translate requests into its reads.

- `append` commits a v2 event: next seq, on the durable stream, /history, the sync log, and /api/event +
  /global/event (bus copy and sync twin). `append_legacy` commits a legacy one: next seq, the sync log and
  /global/event only (§3.1). A session's seq 0 (`created=True`) is in its sync log only.
- Raw injections are bad input, not history: each goes once to whichever durable stream of the session is
  read next.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from tests.support.serve_model.faults import FaultPlan
from tests.support.serve_model.frames import dumps, global_frames, sse, sync_item
from tests.support.serve_model.rules import history_page, items_after, sync_answer

Stream = asyncio.Queue[bytes | None]  # a live reader: b"" cuts it mid-body, None ends it cleanly


@dataclass
class FakeSession:
    id: str
    directory: str = "/srv/agent/proj"
    events: list[dict[str, Any]] = field(default_factory=list)  # durable envelopes (no location)
    deleted: bool = False
    next_seq: int = 1
    raw_injections: list[tuple[int, bytes]] = field(default_factory=list)  # (after seq, bytes)
    raw_delivered: set[int] = field(default_factory=set)
    log: list[dict[str, Any]] = field(default_factory=list)  # the sync log: every persisted event, in seq order


class DurableCursor:
    """One durable stream's read position: what it has not sent yet (events after its `after`, in seq
    order, then the session's undelivered raw injections)."""

    def __init__(self, session: FakeSession, after: int) -> None:
        self.session, self.after, self._pos = session, after, 0
        self._raws: list[int] = []

    def take(self) -> bytes:
        s, pending = self.session, []
        while self._pos < len(s.events):  # events are appended in seq order
            e = s.events[self._pos]
            self._pos += 1
            if e["durable"]["seq"] > self.after:
                pending.append(f"data: {dumps(e)}\n\n".encode())
                self.after = e["durable"]["seq"]
        self._raws = [i for i in range(len(s.raw_injections)) if i not in s.raw_delivered]
        pending += [s.raw_injections[i][1] for i in self._raws]
        return b"".join(pending)

    def sent(self) -> None:
        """What `take` gave was written: its raw injections are delivered."""
        self.session.raw_delivered.update(self._raws)


class ServeModel:
    def __init__(self) -> None:
        self.sessions: dict[str, FakeSession] = {}
        self.active: dict[str, Any] = {}
        self.permissions: dict[str, list[dict[str, Any]]] = {}  # pending requests per session
        self.questions: dict[str, list[dict[str, Any]]] = {}  # pending v2 questions per session
        self.legacy_questions: list[dict[str, Any]] = []  # `GET /question` (every session)
        self.todos: dict[str, list[dict[str, Any]]] = {}  # `GET /session/{id}/todo` per session
        self.faults = FaultPlan()
        self.live_streams: list[Stream] = []  # `/api/event` readers
        self.global_streams: list[Stream] = []  # `/global/event` readers
        self._changed = asyncio.Condition()
        self._counter = 0

    # -- the fault plan under the names the tests use ------------------------------------------------------
    @property
    def fail_status(self) -> dict[str, int]:
        return self.faults.fail_status

    @property
    def global_paused(self) -> bool:
        return self.faults.global_paused

    @global_paused.setter
    def global_paused(self, paused: bool) -> None:
        self.faults.global_paused = paused

    @property
    def sync_drop_next(self) -> int:
        return self.faults.sync_drop_next

    @sync_drop_next.setter
    def sync_drop_next(self, n: int) -> None:
        self.faults.sync_drop_next = n

    # -- writes -----------------------------------------------------------------------------------------
    def count(self) -> int:
        """The next of a counter that makes every id this serve hands out unique."""
        self._counter += 1
        return self._counter

    def next_id(self, seq: int) -> str:
        """Like the real server's: time-prefixed and unique (here: the seq, then the counter)."""
        return f"evt_{seq:012d}{self.count():014d}"

    def add_session(self, sid: str, *, created: bool = False) -> FakeSession:
        """A new session; its first event takes seq 1. `created`: its seq 0 is its `session.created`, as the
        real serve's always is (docs/upstream.md §3.1, §14): in the sync log only, never on the durable stream
        or /history. Off by default: most tests compare the mirror with the durable events from seq 1."""
        s = FakeSession(sid)
        self.sessions[sid] = s
        if created:
            s.log.append({"id": self.next_id(0), "aggregate_id": sid, "seq": 0, "type": "session.created.1",
                          "data": {"sessionID": sid, "info": {"id": sid, "title": "New session",
                                                              "directory": s.directory}}})
        return s

    async def append(self, sid: str, type_: str, data: dict[str, Any], *, version: int = 1,
                     seq: int | None = None, live: bool = True) -> dict[str, Any]:
        """Commit one durable event (seq = next, or given to create gaps) and publish it."""
        s = self.sessions[sid]
        seq = s.next_seq if seq is None else seq
        s.next_seq = seq + 1
        env = {"id": self.next_id(seq), "type": type_, "durable": {"aggregateID": sid, "seq": seq, "version": version},
               "data": {"timestamp": int(time.time() * 1000), "sessionID": sid, **data}}
        s.events.append(env)
        s.log.append(sync_item(env))
        if live:
            self.publish_live({**env, "location": {"directory": s.directory}})
        await self.wake()
        return env

    async def append_legacy(self, sid: str, type_: str, data: dict[str, Any], *, live: bool = True,
                            in_log: bool = True) -> dict[str, Any]:
        """Commit one legacy event (`message.updated`, `message.part.updated`, `session.updated` …): it takes
        the next seq, is in the sync log (unless `in_log` is False: a hole of the log itself) and on
        /global/event (bus copy and exact twin), never on the durable stream (docs/upstream.md §3.1)."""
        s = self.sessions[sid]
        seq = s.next_seq
        s.next_seq = seq + 1
        item = {"id": self.next_id(seq), "aggregate_id": sid, "seq": seq, "type": f"{type_}.1",
                "data": {"sessionID": sid, **data}}
        if in_log:
            s.log.append(item)
        if live:
            env = {"id": item["id"], "type": type_, "data": item["data"],
                   "durable": {"aggregateID": sid, "seq": seq, "version": 1}}
            for frame in global_frames(env, s.directory):
                self.publish_global(frame)
        await self.wake()
        return item

    async def inject_raw(self, sid: str, raw: bytes) -> None:
        """Send raw bytes on durable streams of `sid` after the current head (bad input)."""
        s = self.sessions[sid]
        s.raw_injections.append((s.next_seq - 1, raw))
        await self.wake()

    async def delete(self, sid: str) -> None:
        self.sessions[sid].deleted = True
        self.publish_live({"id": "evt_del" + sid, "type": "session.deleted",
                           "durable": {"aggregateID": sid, "seq": 99, "version": 1},
                           "location": {"directory": "/srv/agent/proj"}, "data": {"sessionID": sid}})

    # -- the live streams -------------------------------------------------------------------------------
    def publish_global(self, frame: dict[str, Any]) -> None:
        """One `/global/event` frame to every reader (lost while the fault plan pauses it)."""
        if self.faults.global_paused:
            return
        raw = sse(frame)
        for q in self.global_streams:
            q.put_nowait(raw)

    def publish_live(self, env: dict[str, Any]) -> None:
        """An event on `/api/event` (as given) and on `/global/event` (bus copy and sync twin)."""
        frame = sse(env)
        for q in self.live_streams:
            q.put_nowait(frame)
        loc = env.get("location")
        directory = loc.get("directory") if isinstance(loc, dict) else None
        for one in global_frames(env, directory if isinstance(directory, str) else None):
            self.publish_global(one)

    def publish_live_raw(self, frame: bytes) -> None:
        """Raw bytes on `/api/event` and `/global/event` alike (bad frames)."""
        for q in self.live_streams + ([] if self.faults.global_paused else self.global_streams):
            q.put_nowait(frame)

    def drop_global(self, *, clean: bool = False) -> None:
        """End every `/global/event` connection: cut mid-body, or with a clean EOF."""
        for q in self.global_streams:
            q.put_nowait(None if clean else b"")

    @property
    def global_subscribers(self) -> int:
        return len(self.global_streams)

    @property
    def live_subscribers(self) -> int:
        """Open live-stream readers, `/api/event` and `/global/event` together."""
        return len(self.live_streams) + len(self.global_streams)

    # -- reads ------------------------------------------------------------------------------------------
    def session(self, sid: str) -> FakeSession | None:
        """The session, unless unknown or deleted (the serve's 404)."""
        s = self.sessions.get(sid)
        return None if s is None or s.deleted else s

    def sync(self, asked: dict[str, int]) -> list[dict[str, Any]]:
        return sync_answer({s.id: s.log for s in self.sessions.values()}, asked, items_after)

    def history(self, s: FakeSession, after: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
        page, more = history_page([e for e in s.events if e["durable"]["seq"] > after], limit)
        return list(page), more

    async def wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def changed(self) -> None:
        """Until the next write."""
        async with self._changed:
            await self._changed.wait()
