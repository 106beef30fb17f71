"""The command door's rows (docs/commands.md, "Exactly once"): bridge.store.commands_pending.CommandStore
and the few statements of other tables a command runs (is the session erased, the prompt id's one change,
an erasure), on one object, so that the door has one store seam (its in-memory twin for the door's unit
tests: tests/support/door_twins.py)."""

from __future__ import annotations

from bridge.store.commands_pending import CommandKey, CommandStore
from bridge.store.commands_pending.command_ids import replace_upstream_id
from bridge.store.lifecycle import Erasure, erase_session, is_tombstoned


class DoorStore(CommandStore):
    async def tombstoned(self, session_id: str) -> bool:
        """Whether the session was erased from the mirror (docs/lifecycle.md "Erasure")."""
        async with self.engine.connect() as conn:
            return await is_tombstoned(conn, self.upstream, session_id)

    async def swap_upstream_id(self, key: CommandKey, old: str, new: str) -> str:
        """The row's `upstream_id` becomes `new` if it still holds `old`; the id it holds afterwards."""
        return await replace_upstream_id(self.engine, self.upstream, key, old, new)

    async def erase(self, session_id: str, *, erased_by: str, reason: str, command_id: str) -> Erasure:
        """The session and its subagents' sessions out of the mirror, a tombstone each; idempotent."""
        return await erase_session(self.engine, self.upstream, session_id, erased_by=erased_by, reason=reason,
                                   command_id=command_id)
