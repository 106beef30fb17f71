"""The command door's tables (docs/commands.md): `chat_commands` (every command exactly once, the prompt
rows and the bridge's own legacy queue) and `chat_permission_requests` (pending permission requests and
questions, who answered them).

    command_store.py  CommandStore: a command's row written before the upstream call, completed after
    prompt_queue.py   PromptQueueStore: prompt rows (runtime, the legacy queue, the send claim)
    pending.py        PendingStore: questions, who answered, pending requests; the permission rows' upserts
"""

from typing import TYPE_CHECKING

from bridge.store.commands_pending.command_store import CommandKey, CommandRow, CommandStore
from bridge.store.commands_pending.pending import PendingStore, StoredRequest
from bridge.store.commands_pending.prompt_queue import PromptQueueStore, PromptRow

__all__ = ["CommandKey", "CommandRow", "CommandStore", "PendingStore", "PromptQueueStore", "PromptRow",
           "StoredRequest"]

if TYPE_CHECKING:  # mypy holds the PostgreSQL classes to their ports (bridge.store.ports)
    from sqlalchemy.ext.asyncio import AsyncEngine

    from bridge.store.ports import CommandRowsPort, PendingRequestsPort, PromptQueuePort

    def _conforms(engine: AsyncEngine) -> tuple[CommandRowsPort, PromptQueuePort, PendingRequestsPort]:
        return CommandStore(engine, ""), PromptQueueStore(engine, ""), PendingStore(engine, "")
