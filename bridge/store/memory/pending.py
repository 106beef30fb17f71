"""The in-memory twin of the pending requests' port (bridge.store.ports.pending.PendingRequestsPort;
docs/ports.md, docs/mirror.md "Pending requests"): the first record of each column wins, the first answer
is kept, lists in the order PostgreSQL gives them. `permission_asked` and `permission_replied` record
permission requests as the fan-out does (bridge.store.reads.feed). Pure Python: no I/O.
tests/integration/test_port_pending.py runs the port's contract on it and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from bridge.events.question import QuestionUpdate
from bridge.store.memory.tables import MemoryTables
from bridge.store.payload import storable_json
from bridge.store.ports.pending import MAX_LIST, StoredRequest


def stored_request(r: dict[str, Any]) -> StoredRequest:
    return StoredRequest(r["kind"], r["session_id"], r["request_id"], r["runtime"], r["asked"], r["asked_at"],
                         r["reply"], r["answer"], r["answered_by"], r["replied_at"])


def _by_asked(rows: Iterable[dict[str, Any]], nulls_first: bool) -> list[dict[str, Any]]:
    def key(r: dict[str, Any]) -> tuple[bool, float, str]:
        at = r["asked_at"]
        return ((at is not None) == nulls_first, 0.0 if at is None else at.timestamp(), r["request_id"])
    return sorted(rows, key=key)


class MemoryPendingStore:
    def __init__(self, tables: MemoryTables | None = None, upstream: str = "memory") -> None:
        self.tables = tables or MemoryTables()
        self.upstream = upstream

    async def question(self, update: QuestionUpdate, at: datetime) -> None:
        row: dict[str, Any] = {"request_id": update.request_id, "kind": "question", "session_id": update.session_id,
                               "runtime": update.runtime}
        if update.settled:
            row.update(reply=update.state, replied=storable_json(update.record).value, replied_at=at,
                       answer=update.answers)
            kept: tuple[str, ...] = ("reply", "replied", "replied_at", "answer")
        else:
            row.update(asked=storable_json(update.record).value, asked_at=at, call_id=update.call_id,
                       assistant_message_id=update.assistant_message_id)
            kept = ("asked", "asked_at", "call_id", "assistant_message_id")
        self.tables.record_request(row, kept)

    async def permission_asked(self, session_id: str, request_id: str, envelope: dict[str, Any],
                               at: datetime, action: str | None, assistant_message_id: str | None,
                               call_id: str | None, runtime: str = "v2") -> None:
        row = {"request_id": request_id, "kind": "permission", "session_id": session_id, "runtime": runtime,
               "asked": storable_json(envelope).value, "asked_at": at, "action": action,
               "assistant_message_id": assistant_message_id, "call_id": call_id}
        self.tables.record_request(row, ("asked", "asked_at", "action", "assistant_message_id", "call_id"))

    async def permission_replied(self, session_id: str, request_id: str, envelope: dict[str, Any],
                                 at: datetime, reply: str | None) -> None:
        row = {"request_id": request_id, "kind": "permission", "session_id": session_id, "runtime": "v2",
               "reply": reply or "unknown", "replied": storable_json(envelope).value, "replied_at": at}
        self.tables.record_request(row, ("reply", "replied", "replied_at"))

    async def answered_by(self, request_id: str, subject: str, answer: Any = None) -> None:
        r = self.tables.requests.get(request_id)
        if r is None:
            return
        if r["answered_by"] is None:
            r["answered_by"] = subject
        if answer is not None and r["answer"] is None:
            r["answer"] = storable_json(answer).value

    async def get(self, request_id: str) -> StoredRequest | None:
        r = self.tables.requests.get(request_id)
        return None if r is None else stored_request(r)

    async def questions(self, session_id: str) -> list[StoredRequest]:
        rows = [r for r in self.tables.requests.values() if r["session_id"] == session_id and r["kind"] == "question"]
        return [stored_request(r) for r in _by_asked(rows, nulls_first=True)[:MAX_LIST]]

    async def session_requests(self, session_id: str, kind: str, runtime: str | None = None) -> dict[str, str | None]:
        return {r["request_id"]: r["reply"] for r in self.tables.requests.values()
                if r["session_id"] == session_id and r["kind"] == kind and runtime in (None, r["runtime"])}

    async def pending(self, limit: int = MAX_LIST, runtime: str | None = None) -> list[StoredRequest]:
        rows = [r for r in self.tables.requests.values() if r["reply"] is None and runtime in (None, r["runtime"])]
        return [stored_request(r) for r in _by_asked(rows, nulls_first=False)[:limit]]

    async def directories(self, session_ids: set[str]) -> dict[str | None, set[str]]:
        out: dict[str | None, set[str]] = {}
        for sid in session_ids:
            row = self.tables.sessions.get(sid)
            out.setdefault(None if row is None else row.directory, set()).add(sid)
        return out

    async def sessions_of(self, request_ids: list[str]) -> dict[str, str]:
        return {rid: self.tables.requests[rid]["session_id"] for rid in request_ids if rid in self.tables.requests}
