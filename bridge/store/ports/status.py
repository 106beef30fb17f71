"""The port of sessions' status and titles (docs/ports.md): what the activity tracker, the parking and
operators write and read of a session's state. PostgreSQL: `LeaseStore` (bridge.store.chat_sessions); in
memory: bridge.store.memory.status.

The rules both keep (tests/integration/test_port_status.py): only the lease holder writes a status, and
never over `deleted`; parking needs the lease free or ours and gives it back; a title writes only when it
changes; a gap marks the session incomplete, once per range; the turn state is the status and the kinds of
the stored events since the last prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bridge.store.codecs import SessionRow

StatusWrite = tuple[str, str, str | None]  # session id, status, reason


@dataclass(frozen=True)
class TurnState:
    status: str
    reason: str | None
    tail_kinds: list[str]  # kinds of the latest stored events since the last prompt, oldest first


class SessionStatusPort(Protocol):
    async def turn_state(self, session_id: str, limit: int = 200) -> TurnState: ...

    async def set_status(self, session_id: str, owner: str, status: str, reason: str | None) -> bool:
        """Whether it was written (the lease holder only, never a deleted session)."""
        ...

    async def park(self, session_id: str, owner: str, reason: str) -> bool: ...

    async def parked(self) -> list[SessionRow]: ...

    async def record_gap(self, session_id: str, from_seq: int, to_seq: int) -> None: ...

    async def set_title(self, session_id: str, title: str) -> None: ...

    async def write_activity(self, owner: str, rounds: Sequence[Sequence[StatusWrite]],
                             titles: Sequence[tuple[str, str]]) -> list[set[str]]:
        """Titles, then rounds of statuses (a session at most once per round), all at once; per round, the
        sessions written."""
        ...

    async def gaps(self, session_id: str) -> list[tuple[int, int]]: ...
