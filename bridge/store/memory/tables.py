"""The rows the in-memory twins share (docs/ports.md): one `MemoryTables` stands for one upstream's
database — sessions (`chat_sessions`, with their gaps and stored events), command rows (`chat_commands`)
and pending requests (`chat_permission_requests`) — so that twins of different ports see each other's
writes as the PostgreSQL classes do (a status written only by the lease holder, a prompt row the command
rows' claim inserted, a session's directory for the pending requests).

`journal` lists every change a process could observe, in order, as the notifications (`bridge_status`,
`bridge_commands`) and the rows of a real database would show it. `clock` stands for the database clock.
Pure Python: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bridge.errors import LeaseLost
from bridge.store.ports.commands import CommandKey

# The columns of a `chat_commands` row the twins keep (the others the bridge never reads back).
COMMAND_COLUMNS = frozenset({
    "command_id", "command", "session_id", "subject", "target_session", "scope", "fingerprint", "body", "state",
    "upstream_id", "upstream_status", "admitted_seq", "http_status", "result", "created_at", "completed_at",
    "runtime", "sent_at", "send_token", "send_claimed_at",
})


@dataclass
class MemoryEvent:
    """A stored event as the stores read it back: its seq, kind, upstream type and message id."""

    seq: int
    kind: str
    type: str = ""
    message_id: str | None = None


@dataclass
class MemorySession:
    """One `chat_sessions` row (and its gaps, and its stored events, oldest first)."""

    session_id: str
    directory: str | None = None
    cursor_seq: int = 0
    status: str = "idle"
    status_reason: str | None = None
    status_version: int = 0
    title: str | None = None
    deleted: bool = False
    incomplete: bool = False
    lease_owner: str | None = None
    lease_epoch: int = 0
    lease_expires_at: datetime | None = None
    gaps: list[tuple[int, int]] = field(default_factory=list)
    events: list[MemoryEvent] = field(default_factory=list)

    @property
    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


class MemoryTables:
    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.sessions: dict[str, MemorySession] = {}
        self.commands: dict[CommandKey, dict[str, Any]] = {}
        self.requests: dict[str, dict[str, Any]] = {}
        self.journal: list[tuple[Any, ...]] = []
        self.clock = clock
        self._last_stamp: datetime | None = None

    def stamp(self) -> datetime:
        """A row's creation time: the clock, but after every earlier stamp (as separate transactions'
        `now()`), so that rows created one after the other keep their order under a stopped test clock."""
        now = self.clock()
        if self._last_stamp is not None and now <= self._last_stamp:
            now = self._last_stamp + timedelta(microseconds=1)
        self._last_stamp = now
        return now

    # --- chat_sessions ----------------------------------------------------------------------------------

    def put(self, session_id: str, *, kinds: Sequence[str] | None = None, **columns: Any) -> MemorySession:
        """Create or change a row as an earlier process would have left it (test set-up); `kinds`: its stored
        events, oldest first."""
        row = self.sessions.get(session_id) or MemorySession(session_id)
        if kinds is not None:
            columns["events"] = [MemoryEvent(i + 1, k) for i, k in enumerate(kinds)]
        self.sessions[session_id] = row = replace(row, **columns)
        return row

    def store_events(self, session_id: str, epoch: int, events: Sequence[MemoryEvent]) -> int:
        """A committed batch (the write transaction's fence, rows and cursor): the new cursor; `LeaseLost`
        when `epoch` does not hold the lease. A seq stored already is not stored twice."""
        row = self.sessions.get(session_id)
        if row is None or row.lease_owner is None or row.lease_epoch != epoch:
            raise LeaseLost(f"session {session_id!r}: epoch {epoch} presented (memory twin)")
        have = {e.seq for e in row.events}
        row.events.extend(e for e in events if e.seq not in have)
        row.events.sort(key=lambda e: e.seq)
        row.cursor_seq = max([row.cursor_seq, *(e.seq for e in events)])
        return row.cursor_seq

    def advance(self, session_id: str, epoch: int, seq: int, kinds: Sequence[str] | None = None) -> int:
        """A committed batch up to `seq` whose events have these kinds (numbered up to `seq`)."""
        kinds = list(kinds or [])
        events = [MemoryEvent(seq - len(kinds) + 1 + i, k) for i, k in enumerate(kinds)]
        cursor = self.store_events(session_id, epoch, events)
        row = self.sessions[session_id]
        row.cursor_seq = max(cursor, seq)
        return row.cursor_seq

    def write_status(self, row: MemorySession, status: str, reason: str | None) -> None:
        row.status, row.status_reason, row.status_version = status, reason, row.status_version + 1
        self.journal.append(("status", row.session_id, status, reason))

    # --- chat_commands ----------------------------------------------------------------------------------

    def update_command(self, key: CommandKey, values: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(values) - COMMAND_COLUMNS
        if unknown:
            raise ValueError(f"chat_commands has no column {sorted(unknown)} (memory twin)")
        row = self.commands[key]
        row.update(values)
        return row

    def announce(self, session_id: str | None, command_id: str, state: str) -> None:
        if session_id is not None:
            self.journal.append(("command", session_id, command_id, state))

    # --- chat_permission_requests -----------------------------------------------------------------------

    def record_request(self, row: Mapping[str, Any], kept: Sequence[str]) -> None:
        """Insert the request, or fill in the columns `kept` that are still empty: the first record of each
        column wins (a second process, a reconnect)."""
        old = self.requests.get(row["request_id"])
        if old is None:
            self.requests[row["request_id"]] = {"reply": None, "answer": None, "answered_by": None,
                                                "asked": None, "asked_at": None, "replied_at": None, **row}
            return
        for name in kept:
            if old.get(name) is None:
                old[name] = row.get(name)
