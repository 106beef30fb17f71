"""The in-memory twin of the lease port (bridge.store.ports.leases.LeasePort; docs/ports.md): the same
claim decision (bridge.lease, through bridge.store.chat_sessions.claim_plan), epochs that fence, renewals
that never revive a lease a peer took. Pure Python: no I/O. tests/integration/test_port_leases.py runs the
port's contract on it and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from bridge.errors import LeaseHeld
from bridge.lease import LeaseView, nobody_dead
from bridge.store.chat_sessions.claim_plan import decide_batch, sorted_rows, storable_directory
from bridge.store.codecs import SessionRow
from bridge.store.memory.tables import MemorySession, MemoryTables
from bridge.store.ports.leases import Claim, ClaimAsk, ClaimOutcome


def lease_view(row: MemorySession) -> LeaseView:
    return LeaseView(row.lease_owner, row.lease_epoch, row.lease_expires_at, row.deleted)


class MemoryLeases:
    def __init__(self, tables: MemoryTables | None = None) -> None:
        self.tables = tables or MemoryTables()

    def _now(self) -> datetime:
        return self.tables.clock()

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
        rows = self.tables.sessions
        for a in asks:
            row = rows.get(a.session_id) or self.tables.put(a.session_id)
            row.directory = storable_directory(a.directory) or row.directory
        locked = {a.session_id: lease_view(rows[a.session_id]) for a in asks}
        verdicts = decide_batch(asks, locked, owner, self._now(), holder_dead)
        out: list[ClaimOutcome] = []
        for a in asks:
            row, verdict = rows[a.session_id], verdicts[a.session_id]
            if not verdict.takes:
                out.append(LeaseHeld(a.session_id, verdict, row.lease_owner))
                continue
            previous = row.lease_owner
            row.lease_owner, row.lease_epoch = owner, row.lease_epoch + 1
            row.lease_expires_at = self._now() + timedelta(seconds=lease_ttl_s)
            self.tables.journal.append(("claim", a.session_id, owner, row.lease_epoch))
            out.append(Claim(row.lease_epoch, row.cursor_seq, verdict, previous, row.status, row.status_reason))
        return out

    async def release(self, session_id: str, epoch: int) -> None:
        row = self.tables.sessions.get(session_id)
        if row is not None and row.lease_epoch == epoch:
            row.lease_owner = row.lease_expires_at = None
            self.tables.journal.append(("release", session_id, epoch))

    async def stored_cursor(self, session_id: str) -> int | None:
        row = self.tables.sessions.get(session_id)
        return None if row is None else row.cursor_seq

    async def mark_deleted(self, session_id: str) -> None:
        row = self.tables.sessions.get(session_id) or self.tables.put(session_id)
        if not row.deleted:
            self.tables.write_status(row, "deleted", row.status_reason)
            row.deleted = True

    async def heartbeat(self, incarnation_id: str, hostname: str, pid: int, ttl_s: float) -> dict[str, int]:
        ours = [r for r in self.tables.sessions.values() if r.lease_owner == incarnation_id and not r.deleted]
        for r in ours:
            r.lease_expires_at = self._now() + timedelta(seconds=ttl_s)
        return {r.session_id: r.lease_epoch for r in sorted(ours, key=lambda r: r.session_id)}

    async def hand_off(self, incarnation_id: str) -> None:
        for r in self.tables.sessions.values():
            if r.lease_owner == incarnation_id:
                r.lease_expires_at = self._now()

    async def adoption_candidates(self, me: str, holder_dead: Callable[[str], bool] = nobody_dead) -> list[SessionRow]:
        now, judged = self._now(), dict[str, bool]()
        out = []
        for r in sorted(self.tables.sessions.values(), key=lambda r: r.session_id):
            if r.deleted:
                continue
            expired = r.lease_expires_at is None or r.lease_expires_at <= now
            if r.lease_owner is None:
                adoptable = r.status == "running"
            elif expired:
                adoptable = True
            elif r.lease_owner == me:
                adoptable = False
            else:  # a live holder: asked once, as the database side does (bridge.store.chat_sessions.adoption)
                if r.lease_owner not in judged:
                    judged[r.lease_owner] = holder_dead(r.lease_owner)
                adoptable = judged[r.lease_owner]
            if adoptable:
                out.append(SessionRow(r.session_id, directory=r.directory, lease_owner=r.lease_owner,
                                      lease_expired=expired))
        return out
