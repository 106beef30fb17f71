"""In-memory twins of the command door's store seams, for the door's unit tests (tests/unit/test_<module>.py of
bridge/command_service): `DoorStoreTwin` stands in for bridge.command_service.rows.DoorStore (the command
rows), `PromptQueueTwin` for bridge.store.commands_pending.PromptQueueStore (the same rows seen as prompts:
runtime, the legacy queue, the send claim), `PendingTwin` for its PendingStore (who answered a request).

They keep the rows in dicts and decide with the same pure rules the SQL runs (bridge.commands.legacy_delivery
`claim_action`, `holds_claim`); the claim's age comes from an injected clock instead of the database's.
The SQL itself is checked against PostgreSQL by the integration suites (tests/integration/test_commands_*.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bridge.auth import Claims
from bridge.commands.affinity import TurnHistory
from bridge.commands.legacy_delivery import DROPPED, QUEUED, SENDING, ClaimAction, claim_action, holds_claim
from bridge.commands.model import Command
from bridge.store.codecs import SessionRow
from bridge.store.commands_pending import CommandKey, CommandRow, PromptRow, StoredRequest
from bridge.store.lifecycle import Erasure

UPSTREAM = "up"


@dataclass
class Row:
    """One `chat_commands` row, every column the door reads or writes."""

    key: CommandKey
    command: str
    session_id: str | None
    fingerprint: str
    body: dict[str, Any]
    state: str = "pending"
    upstream_id: str | None = None
    http_status: int | None = None
    result: dict[str, Any] | None = None
    runtime: str | None = None
    upstream_status: int | None = None
    admitted_seq: int | None = None
    send_token: str | None = None
    claimed_at: float | None = None
    created: int = 0  # insertion order: the queue's FIFO
    extra: dict[str, Any] = field(default_factory=dict)

    def command_row(self) -> CommandRow:
        return CommandRow(self.key.command_id, self.command, self.session_id, self.fingerprint, self.state,
                          self.upstream_id, self.http_status, self.result, self.key.subject)

    def prompt_row(self) -> PromptRow:
        return PromptRow(self.key.command_id, self.key.subject, self.key.target_session, self.session_id or "",
                         self.state, self.runtime, self.upstream_id, self.body, self.http_status, self.result,
                         datetime.fromtimestamp(1_700_000_000 + self.created, UTC))


class DoorStoreTwin:
    def __init__(self, upstream: str = UPSTREAM) -> None:
        self.upstream = upstream
        self.rows: dict[CommandKey, Row] = {}
        self.sessions: dict[str, SessionRow] = {}  # the mirror's `chat_sessions`
        self.tombstones: set[str] = set()
        self.mirror_message_ids: dict[str, list[str]] = {}  # per session, what the mirror stored
        self.permission_replies: dict[str, tuple[str, str | None]] = {}
        self.erased: list[tuple[str, str, str]] = []  # (session, by, reason)

    async def claim(self, cmd: Command, subject: str, scope: str, upstream_id: str | None,
                    session_id: str | None) -> tuple[CommandRow, bool]:
        key = CommandKey.of(cmd, subject)
        if key in self.rows:
            return self.rows[key].command_row(), False
        self.rows[key] = Row(key, cmd.name, session_id, cmd.fingerprint, dict(cmd.args), upstream_id=upstream_id,
                             created=len(self.rows))
        return self.rows[key].command_row(), True

    async def earlier_message_id(self, session_id: str, derived: str) -> str | None:
        digest = derived[-14:]
        return next((m for m in self.mirror_message_ids.get(session_id, []) if m != derived and m.endswith(digest)),
                    None)

    async def use_upstream_id(self, cmd: Command, subject: str, row: CommandRow, upstream_id: str) -> CommandRow:
        held = self.rows[CommandKey.of(cmd, subject)]
        if held.state == "pending":
            held.upstream_id = upstream_id
        return dataclasses.replace(row, upstream_id=upstream_id)

    async def complete(self, key: CommandKey, *, state: str, http_status: int, result: dict[str, Any],
                       upstream_status: int | None = None, admitted_seq: int | None = None) -> None:
        row = self.rows.get(key)
        if row is not None and row.state in ("pending", "sending"):
            row.state, row.http_status, row.result = state, http_status, result
            row.upstream_status, row.admitted_seq = upstream_status, admitted_seq

    async def for_session(self, session_id: str, limit: int = 100) -> list[dict[str, Any]]:
        rows = sorted((r for r in self.rows.values() if r.session_id == session_id), key=lambda r: -r.created)
        return [{"command_id": r.key.command_id, "command": r.command, "state": r.state} for r in rows[:limit]]

    async def session(self, session_id: str) -> SessionRow | None:
        return self.sessions.get(session_id)

    async def permission_reply(self, request_id: str) -> tuple[str, str | None] | None:
        return self.permission_replies.get(request_id)

    async def tombstoned(self, session_id: str) -> bool:
        return session_id in self.tombstones

    async def swap_upstream_id(self, key: CommandKey, old: str, new: str) -> str:
        row = self.rows[key]
        if row.upstream_id == old:
            row.upstream_id = new
        return row.upstream_id or new

    async def erase(self, session_id: str, *, erased_by: str, reason: str, command_id: str) -> Erasure:
        already = session_id in self.tombstones
        self.tombstones.add(session_id)
        self.erased.append((session_id, erased_by, reason))
        return Erasure(session_id, (session_id,), {session_id: {"chat_session_events": 0 if already else 3}},
                       already)


class PromptQueueTwin:
    """The prompt side of the same rows (`store.rows`); `clock` ages the send claims."""

    def __init__(self, store: DoorStoreTwin, clock: Callable[[], float]) -> None:
        self.store = store
        self.upstream = store.upstream
        self._clock = clock
        self.history: dict[str, TurnHistory] = {}
        self.deleted: set[str] = set()
        self.announced: list[tuple[str, str]] = []  # (command_id, state) told to the WebSocket subscribers

    def add(self, row: Row) -> Row:
        """A row as a test wants it (a queued prompt, a row left `sending`)."""
        row.created = len(self.store.rows)
        self.store.rows[row.key] = row
        return row

    def _in_queue(self, r: Row) -> bool:
        return r.command == "prompt" and (r.state == QUEUED or (
            r.state == SENDING and (r.result or {}).get("state") == QUEUED))

    async def turn_history(self, session_id: str) -> TurnHistory:
        return self.history.get(session_id, TurnHistory())

    async def session_deleted(self, session_id: str) -> bool:
        return session_id in self.deleted

    async def row(self, key: CommandKey) -> PromptRow | None:
        r = self.store.rows.get(key)
        return None if r is None else r.prompt_row()

    async def move(self, key: CommandKey, from_states: Iterable[str], to_state: str, *, announce: str | None = None,
                   **values: Any) -> bool:
        r = self.store.rows.get(key)
        if r is None or r.state not in tuple(from_states):
            return False
        r.state = to_state
        for name, value in values.items():
            if hasattr(r, name):
                setattr(r, name, value)
            else:
                r.extra[name] = value
        if announce is not None:
            self.announced.append((key.command_id, announce))
        return True

    async def queued_ahead(self, session_id: str, key: CommandKey) -> int:
        return sum(1 for r in self.store.rows.values()
                   if r.session_id == session_id and self._in_queue(r) and r.key != key)

    async def heads(self, limit: int = 200) -> list[PromptRow]:
        first: dict[str, Row] = {}
        for r in sorted(self.store.rows.values(), key=lambda r: r.created):
            if self._in_queue(r) and r.session_id is not None:
                first.setdefault(r.session_id, r)
        return [first[sid].prompt_row() for sid in sorted(first)][:limit]

    async def drop_queued(self, session_id: str, reason: str) -> list[str]:
        dropped = []
        for r in sorted(self.store.rows.values(), key=lambda r: r.created):
            if r.session_id == session_id and r.state == QUEUED:
                r.state, r.http_status = DROPPED, 200
                r.result = {"command_id": r.key.command_id, "state": DROPPED, "reason": reason}
                self.announced.append((r.key.command_id, DROPPED))
                dropped.append(r.key.command_id)
        return dropped

    def _age(self, r: Row) -> float | None:
        return None if r.claimed_at is None else self._clock() - r.claimed_at

    async def claim(self, key: CommandKey, token: str) -> tuple[ClaimAction, PromptRow | None]:
        r = self.store.rows.get(key)
        if r is None:
            return ClaimAction.HELD, None
        before = r.prompt_row()
        action = claim_action(r.state, r.send_token, token, self._age(r))
        if action is ClaimAction.TAKE:
            r.state, r.runtime, r.send_token, r.claimed_at = SENDING, "legacy", token, self._clock()
        return action, before

    async def renew(self, key: CommandKey, token: str) -> bool:
        r = self.store.rows[key]
        if not holds_claim(r.state, r.send_token, token, self._age(r)):
            return False
        r.claimed_at = self._clock()
        return True

    async def release(self, key: CommandKey, token: str) -> None:
        r = self.store.rows[key]
        if r.state == SENDING and r.send_token == token:
            r.send_token = None


class PendingTwin:
    """bridge.store.commands_pending.PendingStore's `get` and `answered_by`."""

    def __init__(self) -> None:
        self.requests: dict[str, StoredRequest] = {}
        self.answers: dict[str, tuple[str, Any]] = {}

    async def get(self, request_id: str) -> StoredRequest | None:
        return self.requests.get(request_id)

    async def answered_by(self, request_id: str, subject: str, answer: Any = None) -> None:
        self.answers.setdefault(request_id, (subject, answer))  # only the first answer is kept


def claims(scope: str = "control", sessions: frozenset[str] | None = None, approve: str = "always",
           subject: str = "alice") -> Claims:
    """A verified token's claims, as bridge.auth.verify_token returns them."""
    return Claims(UPSTREAM, sessions, 2e9, subject=subject, scope=scope, approve=approve, jti=f"jti-{subject}")
