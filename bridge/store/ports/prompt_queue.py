"""The port of the prompt queue (docs/ports.md, docs/commands.md "The legacy queue", "The send claim"):
prompt rows on both runtimes, the bridge's own queue behind a legacy turn, and the send claim (one sender
at a time). PostgreSQL: `PromptQueueStore` (bridge.store.commands_pending); in memory:
bridge.store.memory.prompt_queue. The rows are the command rows (bridge.store.ports.commands).

The rules both keep (tests/integration/test_port_prompt_queue.py): a row moves only from one of the states
given; the queue is the `queued` rows and the `sending` rows that were queued; each session's head is its
oldest one (created time, then command id); dropping moves every `queued` row of the session to `dropped`;
the send claim follows bridge.commands.legacy_delivery (`claim_action`, `holds_claim`) by the age of the
claim, and a release lets only the token's own claim go.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from bridge.commands.affinity import TurnHistory
from bridge.commands.legacy_delivery import ClaimAction
from bridge.store.ports.commands import CommandKey


@dataclass(frozen=True)
class PromptRow:
    command_id: str
    subject: str
    target_session: str
    session_id: str
    state: str
    runtime: str | None
    upstream_id: str | None
    body: dict[str, Any]
    http_status: int | None
    result: dict[str, Any] | None
    created_at: datetime

    @property
    def key(self) -> CommandKey:
        return CommandKey(self.subject, self.target_session, self.command_id)


class PromptQueuePort(Protocol):
    async def turn_history(self, session_id: str) -> TurnHistory:
        """The runtime of the session's latest stored turn and every runtime its turns ran in."""
        ...

    async def session_deleted(self, session_id: str) -> bool: ...

    async def row(self, key: CommandKey) -> PromptRow | None: ...

    async def move(self, key: CommandKey, from_states: Iterable[str], to_state: str, *, announce: str | None = None,
                   **values: Any) -> bool:
        """`state` from one of `from_states` to `to_state` (with column `values`); False if it was elsewhere."""
        ...

    async def queued_ahead(self, session_id: str, key: CommandKey) -> int: ...

    async def heads(self, limit: int = 200) -> list[PromptRow]:
        """The oldest waiting prompt of every session that has one, in session order."""
        ...

    async def drop_queued(self, session_id: str, reason: str) -> list[str]: ...

    async def claim(self, key: CommandKey, token: str) -> tuple[ClaimAction, PromptRow | None]: ...

    async def renew(self, key: CommandKey, token: str) -> bool: ...

    async def release(self, key: CommandKey, token: str) -> None: ...
