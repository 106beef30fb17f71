"""The command door's twins for its unit tests (tests/unit/test_<module>.py of bridge.command_service): the
store ports' in-memory twins (bridge.store.memory, held to PostgreSQL by tests/integration/test_port_*.py)
on one `MemoryTables`, and `DoorStoreTwin`, which adds to the command rows' twin only what the door's seam
(bridge.command_service.rows.DoorRows) adds over the port: the tombstone check and the erasure (held to
PostgreSQL by tests/integration/test_door_rows.py). The helpers set a scene as an earlier process would
have left the tables."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bridge.auth import Claims
from bridge.store.lifecycle import Erasure
from bridge.store.memory import MemoryCommandStore, MemoryEvent, MemoryPendingStore, MemoryPromptQueue, MemoryTables
from bridge.store.ports.commands import CommandKey

UPSTREAM = "up"


class DoorStoreTwin(MemoryCommandStore):
    def __init__(self, tables: MemoryTables | None = None, upstream: str = UPSTREAM) -> None:
        super().__init__(tables, upstream)
        self.tombstones: set[str] = set()
        self.erased: list[tuple[str, str, str]] = []  # (session, by, reason)

    async def tombstoned(self, session_id: str) -> bool:
        return session_id in self.tombstones

    async def erase(self, session_id: str, *, erased_by: str, reason: str, command_id: str) -> Erasure:
        already = session_id in self.tombstones
        self.tombstones.add(session_id)
        self.erased.append((session_id, erased_by, reason))
        row = self.tables.sessions.pop(session_id, None)
        return Erasure(session_id, (session_id,), {session_id: {"chat_session_events": len(row.events) if row else 0}},
                       already)


def tables_on(clock: Callable[[], float]) -> MemoryTables:
    """Tables whose database clock reads `clock` (seconds) — the send claim's age."""
    return MemoryTables(lambda: datetime.fromtimestamp(clock(), UTC))


def door_twins(clock: Callable[[], float] = lambda: 0.0) -> tuple[DoorStoreTwin, MemoryPromptQueue,
                                                                  MemoryPendingStore]:
    """The door's three stores on one set of tables, as the door's three PostgreSQL classes on one database."""
    tables = tables_on(clock)
    return DoorStoreTwin(tables), MemoryPromptQueue(tables), MemoryPendingStore(tables, UPSTREAM)


def add_prompt(tables: MemoryTables, key: CommandKey, body: dict[str, Any], *, state: str = "pending",
               upstream_id: str | None = None, result: dict[str, Any] | None = None) -> dict[str, Any]:
    """A prompt's `chat_commands` row as an earlier request left it (queued, left `sending`, ...)."""
    row: dict[str, Any] = {
        "command_id": key.command_id, "command": "prompt", "session_id": key.target_session,
        "subject": key.subject, "target_session": key.target_session, "scope": "prompt", "fingerprint": "fp",
        "body": body, "state": state, "upstream_id": upstream_id, "upstream_status": None, "admitted_seq": None,
        "http_status": None, "result": result, "created_at": tables.stamp(), "completed_at": None,
        "runtime": None, "sent_at": None, "send_token": None, "send_claimed_at": None}
    tables.commands[key] = row
    return row


def announced(tables: MemoryTables) -> list[tuple[str, str]]:
    """(command id, state) of every change told to the WebSocket's subscribers, in order."""
    return [(entry[2], entry[3]) for entry in tables.journal if entry[0] == "command"]


def turns(tables: MemoryTables, session_id: str, *types: str) -> None:
    """The session's admitted prompts, oldest first, by upstream event type (what the runtime affinity reads)."""
    tables.put(session_id, events=[MemoryEvent(i + 1, "prompt:admitted", t) for i, t in enumerate(types)])


def claims(scope: str = "control", sessions: frozenset[str] | None = None, approve: str = "always",
           subject: str = "alice") -> Claims:
    """A verified token's claims, as bridge.auth.verify_token returns them."""
    return Claims(UPSTREAM, sessions, 2e9, subject=subject, scope=scope, approve=approve, jti=f"jti-{subject}")
