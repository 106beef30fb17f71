"""`MemoryDriver`: the in-memory twin of the driver port (bridge.upstream.driver) — sessions, logs, hints,
live events and commands held in memory, no I/O. It keeps the same contract as the real drivers
(tests/integration/test_driver_contract.py runs one suite on all of them), so the parts above the port
can be tested against it.

A test plays the serve: `add_session`, `append` (a durable event, hinted to every `changes()` reader),
`publish_live`, `running`, `drop_changes` (every hint reader's stream ends, as a reconnect would);
`calls` records every command."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bridge.errors import SessionNotFound, UpstreamError
from bridge.events.envelope import Envelope, parse_envelope
from bridge.upstream.driver import SWEEP, Admission, Change, Delivery, ListedSession, LogRead

_END = object()


class MemoryDriver:
    def __init__(self, generation: int = 1) -> None:
        self.generation = generation
        self.sessions: dict[str, ListedSession] = {}
        self.logs: dict[str, list[Envelope]] = {}
        self.running: set[str] = set()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self._admitted: dict[tuple[str, str], tuple[tuple[str, str], Admission]] = {}
        self._changed = asyncio.Condition()
        self._hint_queues: list[asyncio.Queue[object]] = []
        self._live_queues: list[asyncio.Queue[object]] = []
        self._ids = itertools.count(1)

    # -- the serve, as a test plays it ---------------------------------------------------------------

    def add_session(self, session_id: str, directory: str | None = None, parent_id: str | None = None) -> None:
        self.sessions[session_id] = ListedSession(session_id, directory, parent_id)
        self.logs.setdefault(session_id, [])

    async def append(self, session_id: str, type_: str, data: dict[str, Any], *, seq: int | None = None) -> Envelope:
        """Commit one durable event (seq = last + 1, or given to make a gap) and hint it."""
        log = self.logs[session_id]
        seq = (log[-1].seq or 0) + 1 if seq is None and log else (1 if seq is None else seq)
        env = parse_envelope({"id": f"evt_twin{next(self._ids):020d}", "type": type_,
                              "durable": {"aggregateID": session_id, "seq": seq, "version": 1},
                              "data": {"sessionID": session_id, **data}})
        log.append(env)
        for q in self._hint_queues:
            q.put_nowait(Change("hint", session_id, seq))
        async with self._changed:
            self._changed.notify_all()
        return env

    def publish_live(self, raw: dict[str, Any]) -> None:
        env = parse_envelope(raw)
        for q in self._live_queues:
            q.put_nowait(env)

    def drop_changes(self) -> None:
        for q in self._hint_queues:
            q.put_nowait(_END)

    def _known(self, session_id: str) -> None:
        if session_id not in self.sessions:
            raise SessionNotFound(f"Session not found: {session_id}", 404, "SessionNotFoundError")

    # -- the port ------------------------------------------------------------------------------------

    async def list_sessions(self) -> list[ListedSession]:
        return list(self.sessions.values())

    async def running_sessions(self) -> set[str]:
        return set(self.running)

    @asynccontextmanager
    async def follow(self, session_id: str, after: int) -> AsyncIterator[AsyncIterator[LogRead]]:
        self._known(session_id)
        yield self._reads(session_id, after)

    async def _reads(self, session_id: str, after: int) -> AsyncIterator[LogRead]:
        cursor = after
        while True:
            async with self._changed:
                fresh = [e for e in self.logs[session_id] if e.seq is not None and e.seq > cursor]
                if not fresh:
                    await self._changed.wait()
                    continue
            cursor = max(e.seq or cursor for e in fresh)
            yield LogRead(fresh)

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[AsyncIterator[Change]]:
        q: asyncio.Queue[object] = asyncio.Queue()
        q.put_nowait(SWEEP)  # first on every (re)connect: what happened meanwhile was not hinted
        self._hint_queues.append(q)
        try:
            yield self._drain(q)
        finally:
            self._hint_queues.remove(q)

    @asynccontextmanager
    async def live(self) -> AsyncIterator[AsyncIterator[Envelope]]:
        q: asyncio.Queue[object] = asyncio.Queue()
        self._live_queues.append(q)
        try:
            yield self._drain(q)
        finally:
            self._live_queues.remove(q)

    @staticmethod
    async def _drain(q: asyncio.Queue[Any]) -> AsyncIterator[Any]:
        while (item := await q.get()) is not _END:
            yield item

    async def prompt(self, session_id: str, directory: str, message_id: str, text: str,
                     delivery: Delivery) -> Admission:
        """Same id and body → the same admission, once (both generations promise it for an `id`)."""
        self._known(session_id)
        key, body = (session_id, message_id), (text, delivery)
        if key in self._admitted:
            seen_body, admission = self._admitted[key]
            if seen_body != body:
                raise UpstreamError(f"prompt {message_id}: HTTP 409 ConflictError: another body under this id",
                                    409, "ConflictError")
            return admission
        self.calls.append(("prompt", (session_id, directory, message_id, text, delivery)))
        env = await self.append(session_id, "prompt.admitted", {"inputID": message_id, "text": text,
                                                                 "delivery": delivery})
        admission = Admission(message_id, env.seq, message_id, {"id": message_id})
        self._admitted[key] = (body, admission)
        return admission

    async def interrupt(self, session_id: str, directory: str) -> bool | None:
        self._known(session_id)
        self.calls.append(("interrupt", (session_id, directory)))
        was = session_id in self.running
        self.running.discard(session_id)
        return was

    async def switch_model(self, session_id: str, directory: str, provider_id: str, model_id: str) -> None:
        self._known(session_id)
        self.calls.append(("switch_model", (session_id, directory, provider_id, model_id)))

    async def switch_agent(self, session_id: str, directory: str, agent: str) -> None:
        self._known(session_id)
        self.calls.append(("switch_agent", (session_id, directory, agent)))

    async def reply_permission(self, session_id: str, directory: str, request_id: str, reply: str) -> None:
        self._known(session_id)
        self.calls.append(("reply_permission", (session_id, directory, request_id, reply)))

    async def reply_question(self, session_id: str, directory: str, request_id: str,
                             answers: list[list[str]] | None) -> None:
        self._known(session_id)
        self.calls.append(("reply_question", (session_id, directory, request_id, answers)))
