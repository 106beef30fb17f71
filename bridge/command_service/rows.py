"""The command door's rows (docs/commands.md, "Exactly once"): the command rows' port
(bridge.store.ports.commands) and the two statements of other tables a command runs (is the session erased,
an erasure), as one seam, `DoorRows`. PostgreSQL: `DoorStore`, the command rows' `CommandStore` with those
two; in memory: the command rows' twin with those two (tests/support/door_twins.py)."""

from __future__ import annotations

from typing import Protocol

from bridge.store.commands_pending import CommandStore
from bridge.store.lifecycle import Erasure, erase_session, is_tombstoned
from bridge.store.ports.commands import CommandRowsPort


class DoorRows(CommandRowsPort, Protocol):
    async def tombstoned(self, session_id: str) -> bool:
        """Whether the session was erased from the mirror (docs/lifecycle.md "Erasure")."""
        ...

    async def erase(self, session_id: str, *, erased_by: str, reason: str, command_id: str) -> Erasure:
        """The session and its subagents' sessions out of the mirror, a tombstone each; idempotent."""
        ...


class DoorStore(CommandStore):
    async def tombstoned(self, session_id: str) -> bool:
        async with self.engine.connect() as conn:
            return await is_tombstoned(conn, self.upstream, session_id)

    async def erase(self, session_id: str, *, erased_by: str, reason: str, command_id: str) -> Erasure:
        return await erase_session(self.engine, self.upstream, session_id, erased_by=erased_by, reason=reason,
                                   command_id=command_id)
