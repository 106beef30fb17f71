"""The in-memory twin of the command rows' port (bridge.store.ports.commands.CommandRowsPort; docs/ports.md,
docs/commands.md "Exactly once"): a command id per subject and target session, one row for it whatever the
number of claims, completed once. Pure Python: no I/O. tests/integration/test_port_commands.py runs the
port's contract on it and on PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bridge.commands.model import Command
from bridge.store.codecs import SessionRow
from bridge.store.memory.tables import MemoryTables
from bridge.store.ports.commands import CommandKey, CommandRow

MAX_LIST = 500
DIGEST_CHARS = 14  # the command digest that ends a derived message id (bridge.commands.model)
_LISTED = ("command_id", "command", "subject", "scope", "body", "state", "upstream_id", "upstream_status",
           "admitted_seq", "http_status", "result", "created_at", "completed_at", "runtime", "sent_at")


def command_row(r: dict[str, Any]) -> CommandRow:
    return CommandRow(command_id=r["command_id"], command=r["command"], session_id=r["session_id"],
                      fingerprint=r["fingerprint"], state=r["state"], upstream_id=r["upstream_id"],
                      http_status=r["http_status"], result=r["result"], subject=r["subject"])


class MemoryCommandStore:
    def __init__(self, tables: MemoryTables | None = None, upstream: str = "memory") -> None:
        self.tables = tables or MemoryTables()
        self.upstream = upstream

    async def claim(self, cmd: Command, subject: str, scope: str, upstream_id: str | None,
                    session_id: str | None) -> tuple[CommandRow, bool]:
        key = CommandKey.of(cmd, subject)
        old = self.tables.commands.get(key)
        if old is not None:
            return command_row(old), False
        row: dict[str, Any] = {
            "command_id": cmd.command_id, "command": cmd.name, "session_id": session_id, "subject": subject,
            "target_session": key.target_session, "scope": scope, "fingerprint": cmd.fingerprint,
            "body": dict(cmd.args), "state": "pending", "upstream_id": upstream_id, "upstream_status": None,
            "admitted_seq": None, "http_status": None, "result": None, "created_at": self.tables.stamp(),
            "completed_at": None, "runtime": None, "sent_at": None, "send_token": None, "send_claimed_at": None}
        self.tables.commands[key] = row
        return command_row(row), True

    async def earlier_message_id(self, session_id: str, derived: str) -> str | None:
        digest = derived[-DIGEST_CHARS:]
        row = self.tables.sessions.get(session_id)
        for e in row.events if row else []:  # in seq order
            mid = e.message_id
            if mid is not None and mid.startswith("msg_") and mid[-DIGEST_CHARS:] == digest and mid != derived:
                return mid
        return None

    async def use_upstream_id(self, cmd: Command, subject: str, row: CommandRow, upstream_id: str) -> CommandRow:
        stored = self.tables.commands.get(CommandKey.of(cmd, subject))
        if stored is not None and stored["state"] == "pending":
            stored["upstream_id"] = upstream_id
        return replace(row, upstream_id=upstream_id)

    async def replace_upstream_id(self, key: CommandKey, old: str, new: str) -> str:
        stored = self.tables.commands.get(key)
        if stored is not None and stored["upstream_id"] == old:
            stored["upstream_id"] = new
        got = None if stored is None else stored["upstream_id"]
        return got if isinstance(got, str) else new

    async def complete(self, key: CommandKey, *, state: str, http_status: int, result: dict[str, Any],
                       upstream_status: int | None = None, admitted_seq: int | None = None) -> None:
        stored = self.tables.commands.get(key)
        if stored is not None and stored["state"] in ("pending", "sending"):
            self.tables.update_command(key, {
                "state": state, "http_status": http_status, "result": result, "upstream_status": upstream_status,
                "admitted_seq": admitted_seq, "completed_at": self.tables.clock()})

    async def for_session(self, session_id: str, limit: int = 100) -> list[dict[str, Any]]:
        rows = [r for r in self.tables.commands.values() if r["session_id"] == session_id]
        rows.sort(key=lambda r: (r["created_at"], r["command_id"]), reverse=True)
        return [{c: r[c] for c in _LISTED} for r in rows[:min(limit, MAX_LIST)]]

    async def session(self, session_id: str) -> SessionRow | None:
        r = self.tables.sessions.get(session_id)
        if r is None:
            return None
        return SessionRow(r.session_id, directory=r.directory, cursor_seq=r.cursor_seq, status=r.status,
                          status_reason=r.status_reason, status_version=r.status_version, deleted=r.deleted,
                          incomplete=r.incomplete, title=r.title)

    async def permission_reply(self, request_id: str) -> tuple[str, str | None] | None:
        r = self.tables.requests.get(request_id)
        if r is None or r["kind"] != "permission":
            return None
        return r["session_id"], r["reply"]
