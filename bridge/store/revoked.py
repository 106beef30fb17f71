"""SQL of the revocation list (`bridge_revoked_tokens`, docs/security.md "Tokens")."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.schema import bridge_revoked_tokens

MAX_LOADED = 1_000_000  # a bound on what one refresh loads (a jti is at most 64 characters)


async def revoke(engine: AsyncEngine, jti: str, reason: str = "") -> bool:
    """Put `jti` on the list; False if it was there already."""
    stmt = pg_insert(bridge_revoked_tokens).values(jti=jti, reason=reason).on_conflict_do_nothing() \
        .returning(bridge_revoked_tokens.c.jti)
    async with engine.begin() as conn:
        return (await conn.execute(stmt)).first() is not None


async def revoked_jtis(engine: AsyncEngine) -> frozenset[str]:
    q = select(bridge_revoked_tokens.c.jti).limit(MAX_LOADED)
    async with engine.connect() as conn:
        return frozenset((await conn.execute(q)).scalars())
