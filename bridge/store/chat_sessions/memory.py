"""The in-memory twin of the `chat_sessions` stores as the session parts use them: `LeaseStore` (heartbeat,
hand-off, adoption candidates, status, parking, titles, gaps, turn state) and the lease and cursor share of
`EventStore` (claim, release, stored cursor, deletion). Same method names and signatures as the real ones
(tests/unit/test_memory_lease_store.py compares them), the same claim decision (bridge.lease), and the same
rules as the SQL of bridge.store.chat_sessions.leases and .status: only the lease holder writes a status,
`deleted` is terminal, parking gives a lease back, renewing never revives a lease someone else holds.

For unit tests of bridge.sessions and bridge.upstream that need the store's behaviour but not PostgreSQL
(the integration tests keep the real one). `journal` lists every change in the order it was made, as the
status notifications (`bridge_status`) and the rows of a real database would show it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bridge.errors import LeaseHeld, LeaseLost
from bridge.lease import LeaseView, nobody_dead
from bridge.store.chat_sessions.claim_plan import ClaimAsk, decide_batch, sorted_rows, storable_directory
from bridge.store.chat_sessions.claims import Claim, ClaimOutcome
from bridge.store.chat_sessions.leases import TurnState
from bridge.store.chat_sessions.status_batch import StatusWrite
from bridge.store.codecs import SessionRow

_PROMPTS = ("prompt:admitted", "prompt:started")


@dataclass
class MemorySession:
    """One `chat_sessions` row (and its gaps, and the kinds of its stored events, oldest first)."""

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
    kinds: list[str] = field(default_factory=list)


class MemoryLeaseStore:
    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.rows: dict[str, MemorySession] = {}
        self.journal: list[tuple[Any, ...]] = []
        self._clock = clock

    def put(self, session_id: str, **columns: Any) -> MemorySession:
        """Create or change a row as an earlier process would have left it (test set-up)."""
        row = self.rows.get(session_id) or MemorySession(session_id)
        self.rows[session_id] = row = replace(row, **columns)
        return row

    def _lease(self, row: MemorySession) -> LeaseView:
        return LeaseView(row.lease_owner, row.lease_epoch, row.lease_expires_at, row.deleted)

    # --- EventStore's share: the lease and the cursor -----------------------------------------------------

    async def claim(self, session_id: str, owner: str, directory: str | None = None, *, lease_ttl_s: float = 15.0,
                    holder_dead: Callable[[str], bool] = nobody_dead) -> tuple[int, int]:
        (outcome,) = await self.claim_many([ClaimAsk(session_id, directory)], owner, lease_ttl_s=lease_ttl_s,
                                           holder_dead=holder_dead)
        if isinstance(outcome, Claim):
            return outcome.epoch, outcome.cursor_seq
        raise outcome

    async def claim_many(self, asks: Sequence[ClaimAsk], owner: str, *, lease_ttl_s: float = 15.0,
                         holder_dead: Callable[[str], bool] = nobody_dead) -> list[ClaimOutcome]:
        sorted_rows(asks)  # one ask per session, as the real batch requires
        for a in asks:
            row = self.rows.get(a.session_id) or self.put(a.session_id)
            row.directory = storable_directory(a.directory) or row.directory
        locked = {a.session_id: self._lease(self.rows[a.session_id]) for a in asks}
        verdicts = decide_batch(asks, locked, owner, self._clock(), holder_dead)
        out: list[ClaimOutcome] = []
        for a in asks:
            row, verdict = self.rows[a.session_id], verdicts[a.session_id]
            if not verdict.takes:
                out.append(LeaseHeld(a.session_id, verdict, row.lease_owner))
                continue
            previous = row.lease_owner
            row.lease_owner, row.lease_epoch = owner, row.lease_epoch + 1
            row.lease_expires_at = self._clock() + timedelta(seconds=lease_ttl_s)
            self.journal.append(("claim", a.session_id, owner, row.lease_epoch))
            out.append(Claim(row.lease_epoch, row.cursor_seq, verdict, previous, row.status, row.status_reason))
        return out

    async def release(self, session_id: str, epoch: int) -> None:
        row = self.rows.get(session_id)
        if row is not None and row.lease_epoch == epoch:
            row.lease_owner = row.lease_expires_at = None
            self.journal.append(("release", session_id, epoch))

    def advance(self, session_id: str, epoch: int, seq: int, kinds: list[str] | None = None) -> int:
        """A committed batch up to `seq` (the write transaction's fence and cursor); LeaseLost when fenced."""
        row = self.rows.get(session_id)
        if row is None or row.lease_owner is None or row.lease_epoch != epoch:
            raise LeaseLost(f"session {session_id!r}: epoch {epoch} presented (memory twin)")
        row.cursor_seq = max(row.cursor_seq, seq)
        row.kinds.extend(kinds or [])
        return row.cursor_seq

    async def stored_cursor(self, session_id: str) -> int | None:
        row = self.rows.get(session_id)
        return None if row is None else row.cursor_seq

    async def mark_deleted(self, session_id: str) -> None:
        row = self.rows.get(session_id) or self.put(session_id)
        if not row.deleted:
            self._status(row, "deleted", row.status_reason)
            row.deleted = True

    # --- LeaseStore ---------------------------------------------------------------------------------------

    async def heartbeat(self, incarnation_id: str, hostname: str, pid: int, ttl_s: float) -> dict[str, int]:
        ours = [r for r in self.rows.values() if r.lease_owner == incarnation_id and not r.deleted]
        for r in ours:
            r.lease_expires_at = self._clock() + timedelta(seconds=ttl_s)
        return {r.session_id: r.lease_epoch for r in sorted(ours, key=lambda r: r.session_id)}

    async def hand_off(self, incarnation_id: str) -> None:
        for r in self.rows.values():
            if r.lease_owner == incarnation_id:
                r.lease_expires_at = self._clock()

    async def adoption_candidates(self, me: str) -> list[SessionRow]:
        out = []
        for r in sorted(self.rows.values(), key=lambda r: r.session_id):
            expired = r.lease_expires_at is None or r.lease_expires_at <= self._clock()
            held_elsewhere = r.lease_owner is not None and (r.lease_owner != me or expired)
            running_unowned = r.lease_owner is None and r.status == "running"
            if not r.deleted and (held_elsewhere or running_unowned):
                out.append(SessionRow(r.session_id, directory=r.directory, lease_owner=r.lease_owner,
                                      lease_expired=expired))
        return out

    async def turn_state(self, session_id: str, limit: int = 200) -> TurnState:
        row = self.rows.get(session_id)
        kinds: list[str] = []
        for kind in reversed((row.kinds if row else [])[-limit:]):  # newest first: stop at the last prompt
            kinds.append(kind)
            if kind in _PROMPTS:
                break
        kinds.reverse()
        return TurnState("idle", None, kinds) if row is None else TurnState(row.status, row.status_reason, kinds)

    async def set_status(self, session_id: str, owner: str, status: str, reason: str | None) -> bool:
        row = self.rows.get(session_id)
        if row is None or row.lease_owner != owner or row.deleted:
            return False
        self._status(row, status, reason)
        return True

    async def park(self, session_id: str, owner: str, reason: str) -> bool:
        row = self.rows.get(session_id)
        if row is None or row.deleted or row.lease_owner not in (None, owner):
            return False
        self._status(row, "parked", reason)
        row.lease_owner = row.lease_expires_at = None
        return True

    async def parked(self) -> list[SessionRow]:
        return [SessionRow(r.session_id, status=r.status, status_reason=r.status_reason)
                for r in sorted(self.rows.values(), key=lambda r: r.session_id)
                if r.status == "parked" and not r.deleted]

    async def record_gap(self, session_id: str, from_seq: int, to_seq: int) -> None:
        row = self.rows.get(session_id) or self.put(session_id)
        if (from_seq, to_seq) not in row.gaps:
            row.gaps = sorted([*row.gaps, (from_seq, to_seq)])
        row.incomplete = True
        self.journal.append(("gap", session_id, from_seq, to_seq))

    async def set_title(self, session_id: str, title: str) -> None:
        row = self.rows.get(session_id)
        if row is not None and row.title != title:
            row.title = title
            self.journal.append(("title", session_id, title))

    async def write_activity(self, owner: str, rounds: Sequence[Sequence[StatusWrite]],
                             titles: Sequence[tuple[str, str]]) -> list[set[str]]:
        for sid, title in titles:
            await self.set_title(sid, title)
        return [{sid for sid, status, reason in r if await self.set_status(sid, owner, status, reason)}
                for r in rounds]

    async def gaps(self, session_id: str) -> list[tuple[int, int]]:
        row = self.rows.get(session_id)
        return [] if row is None else list(row.gaps)

    def _status(self, row: MemorySession, status: str, reason: str | None) -> None:
        row.status, row.status_reason, row.status_version = status, reason, row.status_version + 1
        self.journal.append(("status", row.session_id, status, reason))

