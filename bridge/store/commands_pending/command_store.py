"""SQL of the commands (docs/commands.md): the `chat_commands` row written before the upstream call and
completed after, the session's command list, and what the mirror knows of a session and a permission."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.commands.model import Command
from bridge.store.chat_sessions.reader import read_session
from bridge.store.codecs import SessionRow
from bridge.store.commands_pending.command_ids import replace_upstream_id as _replace_upstream_id
from bridge.store.ports.commands import CommandKey as CommandKey  # re-exported: the records are the port's
from bridge.store.ports.commands import CommandRow as CommandRow
from bridge.store.schema import (
    chat_commands,
    chat_permission_requests,
    chat_session_events,
    chat_sessions,
)

C = chat_commands.c
S = chat_sessions.c
P = chat_permission_requests.c
E = chat_session_events.c

MAX_LIST = 500
DIGEST_CHARS = 14  # the command digest that ends a derived message id (bridge.commands.model)


def _row(r: Any) -> CommandRow:
    return CommandRow(command_id=r.command_id, command=r.command, session_id=r.session_id,
                      fingerprint=r.fingerprint, state=r.state, upstream_id=r.upstream_id,
                      http_status=r.http_status, result=r.result, subject=r.subject)


class CommandStore:
    def __init__(self, engine: AsyncEngine, upstream: str) -> None:
        self._engine = engine
        self.upstream = upstream

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    async def claim(self, cmd: Command, subject: str, scope: str, upstream_id: str | None,
                    session_id: str | None) -> tuple[CommandRow, bool]:
        """Insert the pending row; (row, True) if it is new, else (the existing row, False)."""
        key = CommandKey.of(cmd, subject)
        values = dict(upstream=self.upstream, command_id=cmd.command_id, command=cmd.name, session_id=session_id,
                      subject=subject, target_session=key.target_session, scope=scope,
                      fingerprint=cmd.fingerprint, body=dict(cmd.args),
                      state="pending", upstream_id=upstream_id)
        stmt = pg_insert(chat_commands).values(**values).on_conflict_do_nothing().returning(*chat_commands.c)
        async with self._engine.begin() as conn:
            got = (await conn.execute(stmt)).first()
            if got is not None:
                return _row(got), True
            old = (await conn.execute(select(chat_commands).where(self._key(key)))).first()
        assert old is not None  # rows are never deleted
        return _row(old), False

    async def earlier_message_id(self, session_id: str, derived: str) -> str | None:
        """A message of the session in the mirror whose id ends with the same command digest as `derived`
        (`msg_` + time + digest, bridge.commands.model.upstream_message_id): the id a first attempt used when
        its `chat_commands` row was lost with a failover (docs/scaling.md, "Failover"). None if there is
        none: the mirror never saw one, or has not re-read it from the sync log yet."""
        digest = derived[-DIGEST_CHARS:]
        q = (select(E.message_id)
             .where(and_(E.upstream == self.upstream, E.session_id == session_id, E.message_id.like("msg\\_%"),
                         func.right(E.message_id, DIGEST_CHARS) == digest, E.message_id != derived))
             .order_by(E.seq).limit(1))
        async with self._engine.connect() as conn:
            return (await conn.execute(q)).scalar_one_or_none()

    async def use_upstream_id(self, cmd: Command, subject: str, row: CommandRow, upstream_id: str) -> CommandRow:
        """The pending row re-sends `upstream_id` instead of the id it was given."""
        key = CommandKey.of(cmd, subject)
        stmt = (chat_commands.update().where(and_(self._key(key), C.state == "pending"))
                .values(upstream_id=upstream_id))
        async with self._engine.begin() as conn:
            await conn.execute(stmt)
        return replace(row, upstream_id=upstream_id)

    async def replace_upstream_id(self, key: CommandKey, old: str, new: str) -> str:
        """The row's `upstream_id` becomes `new` if it still holds `old`; the id it holds afterwards."""
        return await _replace_upstream_id(self._engine, self.upstream, key, old, new)

    def _key(self, key: CommandKey) -> ColumnElement[bool]:
        return and_(C.upstream == self.upstream, C.subject == key.subject, C.target_session == key.target_session,
                    C.command_id == key.command_id)

    async def complete(self, key: CommandKey, *, state: str, http_status: int, result: dict[str, Any],
                       upstream_status: int | None = None, admitted_seq: int | None = None) -> None:
        stmt = (chat_commands.update()
                # sending: a legacy prompt (bridge.commands.legacy_delivery)
                .where(and_(self._key(key), C.state.in_(("pending", "sending"))))
                .values(state=state, http_status=http_status, result=result, upstream_status=upstream_status,
                        admitted_seq=admitted_seq, completed_at=datetime.now().astimezone()))
        async with self._engine.begin() as conn:
            await conn.execute(stmt)

    async def for_session(self, session_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """The session's commands, newest first (created sessions included)."""
        q = (select(C.command_id, C.command, C.subject, C.scope, C.body, C.state, C.upstream_id,
                    C.upstream_status, C.admitted_seq, C.http_status, C.result, C.created_at, C.completed_at,
                    C.runtime, C.sent_at)
             .where(and_(C.upstream == self.upstream, C.session_id == session_id))
             .order_by(C.created_at.desc(), C.command_id.desc()).limit(min(limit, MAX_LIST)))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(q)).mappings().all()
        return [dict(r) for r in rows]

    async def session(self, session_id: str) -> SessionRow | None:
        """What the mirror knows of the session (its `directory` and whether it is `deleted`)."""
        async with self._engine.connect() as conn:
            return await read_session(conn, self.upstream, session_id)

    async def permission_reply(self, request_id: str) -> tuple[str, str | None] | None:
        """(session_id, reply) of a permission request the mirror has seen; reply None while pending."""
        q = select(P.session_id, P.reply).where(and_(P.upstream == self.upstream, P.request_id == request_id,
                                                     P.kind == "permission"))
        async with self._engine.connect() as conn:
            r = (await conn.execute(q)).first()
        return None if r is None else (r.session_id, r.reply)
