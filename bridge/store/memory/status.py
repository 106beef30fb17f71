"""The in-memory twin of the status port (bridge.store.ports.status.SessionStatusPort; docs/ports.md): only
the lease holder writes a status, `deleted` is terminal, parking gives the lease back, a title writes only
when it changes, a gap marks the session incomplete. Pure Python: no I/O. tests/integration/
test_port_status.py runs the port's contract on it and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence

from bridge.store.codecs import SessionRow
from bridge.store.memory.tables import MemoryTables
from bridge.store.ports.status import StatusWrite, TurnState

_PROMPTS = ("prompt:admitted", "prompt:started")


class MemoryStatus:
    def __init__(self, tables: MemoryTables | None = None) -> None:
        self.tables = tables or MemoryTables()

    async def turn_state(self, session_id: str, limit: int = 200) -> TurnState:
        row = self.tables.sessions.get(session_id)
        kinds: list[str] = []
        for kind in reversed((row.kinds if row else [])[-limit:]):  # newest first: stop at the last prompt
            kinds.append(kind)
            if kind in _PROMPTS:
                break
        kinds.reverse()
        return TurnState("idle", None, kinds) if row is None else TurnState(row.status, row.status_reason, kinds)

    async def set_status(self, session_id: str, owner: str, status: str, reason: str | None) -> bool:
        row = self.tables.sessions.get(session_id)
        if row is None or row.lease_owner != owner or row.deleted:
            return False
        self.tables.write_status(row, status, reason)
        return True

    async def park(self, session_id: str, owner: str, reason: str) -> bool:
        row = self.tables.sessions.get(session_id)
        if row is None or row.deleted or row.lease_owner not in (None, owner):
            return False
        self.tables.write_status(row, "parked", reason)
        row.lease_owner = row.lease_expires_at = None
        return True

    async def parked(self) -> list[SessionRow]:
        return [SessionRow(r.session_id, status=r.status, status_reason=r.status_reason)
                for r in sorted(self.tables.sessions.values(), key=lambda r: r.session_id)
                if r.status == "parked" and not r.deleted]

    async def record_gap(self, session_id: str, from_seq: int, to_seq: int) -> None:
        row = self.tables.sessions.get(session_id) or self.tables.put(session_id)
        if (from_seq, to_seq) not in row.gaps:
            row.gaps = sorted([*row.gaps, (from_seq, to_seq)])
        row.incomplete = True
        self.tables.journal.append(("gap", session_id, from_seq, to_seq))

    async def set_title(self, session_id: str, title: str) -> None:
        row = self.tables.sessions.get(session_id)
        if row is not None and row.title != title:
            row.title = title
            self.tables.journal.append(("title", session_id, title))

    async def write_activity(self, owner: str, rounds: Sequence[Sequence[StatusWrite]],
                             titles: Sequence[tuple[str, str]]) -> list[set[str]]:
        for r in rounds:
            if len({w[0] for w in r}) != len(r):
                raise ValueError("a session's statuses go into successive statements, in their order")
        for sid, title in titles:
            await self.set_title(sid, title)
        return [{sid for sid, status, reason in r if await self.set_status(sid, owner, status, reason)}
                for r in rounds]

    async def gaps(self, session_id: str) -> list[tuple[int, int]]:
        row = self.tables.sessions.get(session_id)
        return [] if row is None else list(row.gaps)
