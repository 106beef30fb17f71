"""The in-memory twin of the prompt queue's port (bridge.store.ports.prompt_queue.PromptQueuePort;
docs/ports.md, docs/commands.md "The legacy queue", "The send claim"): rows move only from the states
given, each session's queue in creation order, the send claim decided by bridge.commands.legacy_delivery on
the claim's age by the tables' clock. Pure Python: no I/O. tests/integration/test_port_prompt_queue.py
runs the port's contract on it and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bridge.commands.affinity import TurnHistory, runtime_of_type
from bridge.commands.legacy_delivery import DROPPED, QUEUED, SENDING, ClaimAction, claim_action, holds_claim
from bridge.store.memory.tables import MemoryTables
from bridge.store.ports.commands import CommandKey
from bridge.store.ports.prompt_queue import PromptRow

_TURN_KINDS = ("prompt:admitted",)


def prompt_row(r: dict[str, Any]) -> PromptRow:
    return PromptRow(command_id=r["command_id"], subject=r["subject"], target_session=r["target_session"],
                     session_id=r["session_id"], state=r["state"], runtime=r["runtime"],
                     upstream_id=r["upstream_id"], body=r["body"], http_status=r["http_status"], result=r["result"],
                     created_at=r["created_at"])


def in_queue(r: dict[str, Any]) -> bool:
    """`queued`, or `sending` after having been queued (a steer's failed send is the client's to retry)."""
    result = r["result"]
    return r["state"] == QUEUED or (r["state"] == SENDING and isinstance(result, dict)
                                    and result.get("state") == QUEUED)


class MemoryPromptQueue:
    def __init__(self, tables: MemoryTables | None = None) -> None:
        self.tables = tables or MemoryTables()

    async def turn_history(self, session_id: str) -> TurnHistory:
        row = self.tables.sessions.get(session_id)
        turns = [e for e in (row.events if row else []) if e.kind in _TURN_KINDS]
        seen = frozenset(runtime_of_type(e.type) for e in turns)
        latest = max(turns, key=lambda e: e.seq) if turns else None
        return TurnHistory(latest=None if latest is None else runtime_of_type(latest.type), seen=seen)

    async def session_deleted(self, session_id: str) -> bool:
        row = self.tables.sessions.get(session_id)
        return row is not None and row.deleted

    async def row(self, key: CommandKey) -> PromptRow | None:
        r = self.tables.commands.get(key)
        return None if r is None else prompt_row(r)

    async def move(self, key: CommandKey, from_states: Iterable[str], to_state: str, *, announce: str | None = None,
                   **values: Any) -> bool:
        r = self.tables.commands.get(key)
        if r is None or r["state"] not in set(from_states):
            return False
        self.tables.update_command(key, {**values, "state": to_state})
        if announce is not None:
            self.tables.announce(r["session_id"], key.command_id, announce)
        return True

    async def queued_ahead(self, session_id: str, key: CommandKey) -> int:
        return sum(1 for k, r in self.tables.commands.items()
                   if r["session_id"] == session_id and in_queue(r) and k != key)

    async def heads(self, limit: int = 200) -> list[PromptRow]:
        heads: dict[str, dict[str, Any]] = {}
        for r in sorted(self.tables.commands.values(), key=lambda r: (r["created_at"], r["command_id"])):
            if r["command"] == "prompt" and in_queue(r):
                heads.setdefault(r["session_id"], r)
        return [prompt_row(heads[sid]) for sid in sorted(heads)][:limit]

    async def drop_queued(self, session_id: str, reason: str) -> list[str]:
        keys = [k for k, r in self.tables.commands.items() if r["session_id"] == session_id and r["state"] == QUEUED]
        for key in keys:
            cid = key.command_id
            self.tables.update_command(key, {"state": DROPPED, "http_status": 200, "completed_at": self.tables.clock(),
                                             "result": {"command_id": cid, "state": DROPPED, "reason": reason}})
            self.tables.announce(session_id, cid, DROPPED)
        return [key.command_id for key in keys]

    async def claim(self, key: CommandKey, token: str) -> tuple[ClaimAction, PromptRow | None]:
        return self._under_row_lock(key, token, renew=False)

    async def renew(self, key: CommandKey, token: str) -> bool:
        action, _ = self._under_row_lock(key, token, renew=True)
        return action is ClaimAction.TAKE

    async def release(self, key: CommandKey, token: str) -> None:
        r = self.tables.commands.get(key)
        if r is not None and r["state"] == SENDING and r["send_token"] == token:
            r["send_token"] = None

    def _under_row_lock(self, key: CommandKey, token: str, *, renew: bool) -> tuple[ClaimAction, PromptRow | None]:
        r = self.tables.commands.get(key)
        if r is None:
            return ClaimAction.HELD, None
        now, claimed = self.tables.clock(), r["send_claimed_at"]
        age = None if claimed is None else (now - claimed).total_seconds()
        if renew:
            action = ClaimAction.TAKE if holds_claim(r["state"], r["send_token"], token, age) else ClaimAction.HELD
        else:
            action = claim_action(r["state"], r["send_token"], token, age)
        row = prompt_row(r)
        if action is ClaimAction.TAKE:
            self.tables.update_command(key, {"state": SENDING, "runtime": "legacy", "send_token": token,
                                             "send_claimed_at": now})
        return action, row
