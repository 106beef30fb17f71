"""SQL of a prompt row's upstream message id changing once (docs/commands.md, "Exactly once"): the pure v2
id a row is claimed with becomes a time-stamped one when the prompt goes to the legacy runtime. The change
is conditional, so two identical requests racing each other agree on one id."""

from __future__ import annotations

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.ports.commands import CommandKey
from bridge.store.schema import chat_commands

C = chat_commands.c


async def replace_upstream_id(engine: AsyncEngine, upstream: str, key: CommandKey, old: str, new: str) -> str:
    """Set the row's `upstream_id` to `new` if it still holds `old`; the id the row holds afterwards."""
    where = and_(C.upstream == upstream, C.subject == key.subject, C.target_session == key.target_session,
                 C.command_id == key.command_id)
    async with engine.begin() as conn:
        got = (await conn.execute(chat_commands.update().where(and_(where, C.upstream_id == old))
                                  .values(upstream_id=new).returning(C.upstream_id))).scalar_one_or_none()
        if got is None:
            got = (await conn.execute(select(C.upstream_id).where(where))).scalar_one_or_none()
    return got if isinstance(got, str) else new
