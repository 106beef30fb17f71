"""What the adoption sweep reads (docs/lifecycle.md, "Adoption"): only the sessions it may adopt.

A live peer's leases are not read row by row: the sweep asks for the few distinct incarnations holding
live leases, judges each once (`holder_dead`: is that pid gone on this host), and reads the sessions of
those found dead only. With a peer holding 5,000 live sessions a sweep reads one owner, not 5,000 rows
(BENCHMARKS.md, the workers' idle CPU).

Every statement runs in one transaction, so `now()` (the transaction's start) is the same expiry clock
for all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Select, and_, false, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from bridge.store.codecs import SessionRow, session_row
from bridge.store.schema import chat_sessions

S = chat_sessions.c


def _expired() -> Any:
    return or_(S.lease_expires_at.is_(None), S.lease_expires_at <= func.now())


def _columns() -> Select[Any]:
    return select(S.session_id, S.directory, S.lease_owner, _expired().label("lease_expired"))


def select_orphans(upstream: str) -> Select[Any]:
    """Sessions whose lease expired, whoever held it, and free sessions last known running.

    Our own expired leases count too: one whose follower is gone (a crash between claim and follow) is
    warmed again by the sweep; in a single-process deployment nobody else would adopt it. (A lease of a
    session we still follow is simply renewed by the next heartbeat: bridge.store.chat_sessions.leases.)"""
    held_expired = and_(S.lease_owner.is_not(None), _expired())
    running_unowned = and_(S.lease_owner.is_(None), S.status == "running")
    return _columns().where(S.upstream == upstream, S.deleted == false(), or_(held_expired, running_unowned))


def select_live_holders(upstream: str, me: str) -> Select[Any]:
    """The distinct other incarnations holding a live lease: a handful, however many sessions they hold."""
    return (
        select(S.lease_owner).distinct()
        .where(S.upstream == upstream, S.deleted == false(), S.lease_owner.is_not(None), S.lease_owner != me,
               S.lease_expires_at > func.now())
    )


def select_held_by(upstream: str, owners: Sequence[str]) -> Select[Any]:
    """The sessions these incarnations hold (those found dead)."""
    return _columns().where(S.upstream == upstream, S.deleted == false(), S.lease_owner.in_(owners))


async def read_adoption_candidates(conn: AsyncConnection, upstream: str, me: str,
                                   holder_dead: Callable[[str], bool]) -> list[SessionRow]:
    """`session_id`, `directory`, `lease_owner` (None: free, last known running) and `lease_expired` of the
    sessions the sweep may adopt, by session_id; `holder_dead` is asked once per live holder."""
    found = {r.session_id: session_row(r) for r in await conn.execute(select_orphans(upstream))}
    holders = (await conn.execute(select_live_holders(upstream, me))).scalars().all()
    dead = sorted(str(o) for o in holders if holder_dead(str(o)))
    if dead:
        found.update({r.session_id: session_row(r) for r in await conn.execute(select_held_by(upstream, dead))})
    return [found[sid] for sid in sorted(found)]
