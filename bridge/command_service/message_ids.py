"""The upstream ids a command is sent with (docs/commands.md, "Exactly once"): derived when its row is
claimed, so a retry sends the same id and the upstream's own existence check refuses a duplicate
(docs/upstream.md §17). A v2 prompt's id is a pure function of the command; a legacy prompt's must sort
after the session's messages, so it is swapped for a time-stamped one with the same digest before sending."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from bridge.command_service.rows import DoorRows
from bridge.commands.model import Command, upstream_message_id, upstream_session_id, v2_prompt_message_id
from bridge.store.ports.commands import CommandKey, CommandRow


class MessageIds:
    def __init__(self, store: DoorRows, now_ms: Callable[[], int]) -> None:
        self._store = store
        self._now_ms = now_ms

    def derive(self, cmd: Command, subject: str) -> str | None:
        """Two subjects' equal command ids derive different upstream ids (docs/security.md)."""
        upstream = self._store.upstream
        if cmd.name == "prompt" and cmd.session_id is not None:  # time-stamped if it goes legacy
            return v2_prompt_message_id(upstream, cmd.session_id, cmd.command_id, subject)
        if cmd.name == "slash_command" and cmd.session_id is not None:
            return upstream_message_id(upstream, cmd.session_id, cmd.command_id, self._now_ms(), subject)
        if cmd.name == "create_session":
            return upstream_session_id(upstream, cmd.command_id, self._now_ms(), subject)
        return None

    async def legacy_stamped(self, cmd: Command, row: CommandRow) -> CommandRow:
        """The row's pure v2 id becomes a time-stamped one with the same digest (the legacy loop compares
        ids), stored before anything is sent; a row that already holds another id keeps it."""
        assert cmd.session_id is not None
        upstream = self._store.upstream
        if row.upstream_id != v2_prompt_message_id(upstream, cmd.session_id, cmd.command_id, row.subject):
            return row
        stamped = upstream_message_id(upstream, cmd.session_id, cmd.command_id, self._now_ms(), row.subject)
        held = await self._store.replace_upstream_id(CommandKey.of(cmd, row.subject), row.upstream_id, stamped)
        return dataclasses.replace(row, upstream_id=held)
