"""The port of command rows (docs/ports.md, docs/commands.md "Exactly once"): every command's row, written
before the upstream call and completed after, so a retry finds the first attempt. PostgreSQL:
`CommandStore` (bridge.store.commands_pending); in memory: bridge.store.memory.commands.

The rules both keep (tests/integration/test_port_commands.py): a command id is per subject and target
session; the first claim inserts the row and every later one gets that row back, never a second; only a
`pending` row changes its upstream id by `use_upstream_id`, and `replace_upstream_id` only when the row
still holds the old one; only a `pending` or `sending` row completes (the first completion wins); the
session's list is newest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from bridge.commands.model import Command
from bridge.store.codecs import SessionRow


@dataclass(frozen=True)
class CommandKey:
    """Whose `command_id` this is (docs/security.md): ids are per subject and per target session."""

    subject: str
    target_session: str  # the session of the path; "" for create_session
    command_id: str

    @classmethod
    def of(cls, cmd: Command, subject: str) -> CommandKey:
        return cls(subject, cmd.session_id or "", cmd.command_id)


@dataclass(frozen=True)
class CommandRow:
    command_id: str
    command: str
    session_id: str | None
    fingerprint: str
    state: str  # pending | queued | sending | done | failed | dropped
    upstream_id: str | None
    http_status: int | None
    result: dict[str, Any] | None
    subject: str = ""  # the token's `sub` of the first attempt


class CommandRowsPort(Protocol):
    @property
    def upstream(self) -> str: ...

    async def claim(self, cmd: Command, subject: str, scope: str, upstream_id: str | None,
                    session_id: str | None) -> tuple[CommandRow, bool]:
        """(row, True) if the row is new, else (the existing row, False)."""
        ...

    async def earlier_message_id(self, session_id: str, derived: str) -> str | None:
        """A stored message id of the session ending with `derived`'s command digest (not `derived`)."""
        ...

    async def use_upstream_id(self, cmd: Command, subject: str, row: CommandRow, upstream_id: str) -> CommandRow: ...

    async def replace_upstream_id(self, key: CommandKey, old: str, new: str) -> str:
        """`new` if the row still held `old`; the id the row holds afterwards."""
        ...

    async def complete(self, key: CommandKey, *, state: str, http_status: int, result: dict[str, Any],
                       upstream_status: int | None = None, admitted_seq: int | None = None) -> None: ...

    async def for_session(self, session_id: str, limit: int = 100) -> list[dict[str, Any]]: ...

    async def session(self, session_id: str) -> SessionRow | None: ...

    async def permission_reply(self, request_id: str) -> tuple[str, str | None] | None:
        """(session_id, reply) of a permission request seen; reply None while pending."""
        ...
