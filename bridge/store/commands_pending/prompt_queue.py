"""SQL of prompts on both runtimes (docs/commands.md, "Runtime affinity", "The legacy queue"): the
runtimes of a session's stored turns, the state changes of a prompt row, the one-sender lock, and the
queued legacy prompts in order."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, not_, or_, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.commands.affinity import TurnHistory, runtime_of_type
from bridge.commands.legacy_delivery import DROPPED, QUEUED, SENDING
from bridge.store.commands_pending.command_store import CommandKey
from bridge.store.notices import notify_command
from bridge.store.schema import chat_commands, chat_session_events, chat_sessions, session_key

C = chat_commands.c
E = chat_session_events.c
S = chat_sessions.c

# The kinds that begin a turn, in either runtime (docs/legacy.md, "Kind table").
_TURN_KINDS = ("prompt:admitted",)


def _in_queue() -> Any:
    """Rows of the legacy queue: `queued`, or `sending` after having been queued. A row left `sending` by a
    steer whose send failed is the client's to retry (like a v2 `pending` row), not the queue's."""
    return or_(C.state == QUEUED, and_(C.state == SENDING, C.result["state"].astext == QUEUED))


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


def _prompt_row(r: Any) -> PromptRow:
    return PromptRow(command_id=r.command_id, subject=r.subject, target_session=r.target_session,
                     session_id=r.session_id, state=r.state, runtime=r.runtime,
                     upstream_id=r.upstream_id, body=r.body, http_status=r.http_status, result=r.result,
                     created_at=r.created_at)


class PromptQueueStore:
    def __init__(self, engine: AsyncEngine, upstream: str) -> None:
        self._engine = engine
        self.upstream = upstream

    def _key(self, key: CommandKey) -> Any:
        """A command row: its id is the caller's, per subject and target session (docs/security.md)."""
        return and_(C.upstream == self.upstream, C.subject == key.subject, C.target_session == key.target_session,
                    C.command_id == key.command_id)

    async def turn_history(self, session_id: str) -> TurnHistory:
        """The runtime of the session's latest stored turn and every runtime its turns ran in."""
        where = and_(E.upstream == self.upstream, E.session_id == session_id, E.kind.in_(_TURN_KINDS))
        is_v2 = E.type.like("session.next.%")
        async with self._engine.connect() as conn:
            latest = (await conn.execute(select(E.type).where(where).order_by(E.seq.desc()).limit(1))).scalar()
            kinds = (await conn.execute(select(func.bool_or(is_v2), func.bool_or(~is_v2)).where(where))).one()
        seen = {rt for rt, present in zip(("v2", "legacy"), kinds, strict=True) if present}
        return TurnHistory(latest=None if latest is None else runtime_of_type(latest), seen=frozenset(seen))

    async def session_deleted(self, session_id: str) -> bool:
        """Whether the mirror has recorded the session's deletion."""
        q = select(S.deleted).where(session_key(self.upstream, session_id))
        async with self._engine.connect() as conn:
            return bool((await conn.execute(q)).scalar())

    async def row(self, key: CommandKey) -> PromptRow | None:
        async with self._engine.connect() as conn:
            r = (await conn.execute(select(chat_commands).where(self._key(key)))).first()
        return None if r is None else _prompt_row(r)

    async def move(self, key: CommandKey, from_states: Iterable[str], to_state: str, *, announce: str | None = None,
                   **values: Any) -> bool:
        """`state` from one of `from_states` to `to_state` (with `values`); False if the row was elsewhere.
        `announce`: a state to tell the session's WebSocket subscribers, if the row moved."""
        stmt = (chat_commands.update()
                .where(self._key(key), C.state.in_(list(from_states)))
                .values(state=to_state, **values).returning(C.session_id))
        async with self._engine.begin() as conn:
            moved = (await conn.execute(stmt)).first()
            if moved is not None and announce is not None and moved.session_id is not None:
                await conn.execute(notify_command(self.upstream, moved.session_id, key.command_id, announce))
            return moved is not None

    async def queued_ahead(self, session_id: str, key: CommandKey) -> int:
        """Prompts of the session still waiting in the queue, this one left out."""
        q = select(func.count()).where(C.upstream == self.upstream, C.session_id == session_id, _in_queue(),
                                       not_(self._key(key)))
        async with self._engine.connect() as conn:
            return int((await conn.execute(q)).scalar_one())

    async def heads(self, limit: int = 200) -> list[PromptRow]:
        """The oldest waiting prompt of every session that has one (FIFO per session)."""
        q = (select(chat_commands).distinct(C.session_id)
             .where(C.upstream == self.upstream, C.command == "prompt", _in_queue())
             .order_by(C.session_id, C.created_at, C.command_id).limit(limit))
        async with self._engine.connect() as conn:
            return [_prompt_row(r) for r in (await conn.execute(q)).all()]

    async def drop_queued(self, session_id: str, reason: str) -> list[str]:
        """Every queued prompt of the session → `dropped` (never sent); their command ids."""
        pick = (select(C.subject, C.target_session, C.command_id)
                .where(C.upstream == self.upstream, C.session_id == session_id, C.state == "queued")
                .with_for_update())
        async with self._engine.begin() as conn:
            keys = [CommandKey(r.subject, r.target_session, r.command_id) for r in (await conn.execute(pick)).all()]
            for key in keys:
                cid = key.command_id
                await conn.execute(chat_commands.update().where(self._key(key)).values(
                    state=DROPPED, http_status=200, completed_at=func.now(),
                    result={"command_id": cid, "state": DROPPED, "reason": reason}))
                await conn.execute(notify_command(self.upstream, session_id, cid, DROPPED))
        return [key.command_id for key in keys]

    @asynccontextmanager
    async def sender_lock(self, key: CommandKey) -> AsyncIterator[None]:
        """Hold the row's send lock (a session-level advisory lock on a connection of its own): one sender
        at a time, and PostgreSQL lets it go if the process dies."""
        lock = json.dumps(["prompt", self.upstream, key.subject, key.target_session, key.command_id])
        async with self._engine.connect() as conn:
            await conn.execute(text("SELECT pg_advisory_lock(hashtextextended(:k, 0))"), {"k": lock})
            await conn.commit()
            try:
                yield
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(hashtextextended(:k, 0))"), {"k": lock})
                await conn.commit()
