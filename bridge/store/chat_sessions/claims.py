"""SQL of the lease claim, for one session or a batch of them in one transaction (docs/lifecycle.md "Ownership"
and "Warm-up"): ensure the rows, lock them in `session_id` order, decide each (bridge.store.chat_sessions.
claim_plan, i.e. bridge.lease.decide_claim per row), take the winners in one UPDATE. Three statements and
one commit for a whole batch instead of per session: warming 10,000 sessions at once is bound by this.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Insert, Select, Text, Update, any_, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from bridge.errors import LeaseHeld
from bridge.lease import LeaseView
from bridge.store.chat_sessions.claim_plan import ClaimAsk, decide_batch, sorted_rows
from bridge.store.ports.leases import Claim as Claim  # re-exported: the records are the port's
from bridge.store.ports.leases import ClaimOutcome as ClaimOutcome
from bridge.store.schema import chat_session_tombstones, chat_sessions

S = chat_sessions.c
_IDS = ARRAY(Text)


def ttl_from_now(seconds: float) -> Any:
    """A lease's expiry by the database clock (claims and renewals)."""
    return func.now() + func.make_interval(0, 0, 0, 0, 0, 0, seconds)


def ensure_sessions(upstream: str, session_ids: list[str], directories: list[str | None]) -> Insert:
    """Create the missing rows, in the arrays' order (`claim_plan.sorted_rows`: `session_id` order); a known
    row only takes a new directory (one given keeps the stored one otherwise)."""
    arrays = (bindparam("session_ids", session_ids, type_=_IDS), bindparam("directories", directories, type_=_IDS))
    rows = func.unnest(*arrays).table_valued("session_id", "directory").render_derived()
    stmt = pg_insert(chat_sessions).from_select(
        ["upstream", "session_id", "directory"],
        select(bindparam("upstream", upstream, type_=Text), rows.c.session_id, rows.c.directory)
        .order_by(rows.c.session_id),
    )
    return stmt.on_conflict_do_update(
        index_elements=[S.upstream, S.session_id],
        set_={"directory": func.coalesce(stmt.excluded.directory, S.directory)},
    )


def lock_leases(upstream: str, session_ids: list[str]) -> Select[Any]:
    return (
        select(S.session_id, S.lease_owner, S.lease_epoch, S.lease_expires_at, S.deleted, func.now().label("now"))
        .where(S.upstream == upstream, S.session_id == any_(bindparam("locked", session_ids, type_=_IDS)))
        .order_by(S.session_id)
        .with_for_update()
    )


async def erased_among(conn: AsyncConnection, upstream: str, session_ids: list[str]) -> list[str]:
    """The sessions among these that were erased (bridge.store.lifecycle.erase): claimed as deleted."""
    t = chat_session_tombstones.c
    q = select(t.session_id).where(t.upstream == upstream, t.session_id == any_(bindparam("erased", session_ids,
                                                                                        type_=_IDS)))
    return [str(r.session_id) for r in await conn.execute(q)]


def take_leases(upstream: str, session_ids: list[str], owner: str, ttl_s: float) -> Update:
    """The rows are locked already (lock_leases): every epoch moves on."""
    return (
        chat_sessions.update()
        .where(S.upstream == upstream, S.session_id == any_(bindparam("taken", session_ids, type_=_IDS)))
        .values(lease_owner=owner, lease_epoch=S.lease_epoch + 1, lease_expires_at=ttl_from_now(ttl_s),
                updated_at=func.now())
        .returning(S.session_id, S.lease_epoch, S.cursor_seq, S.status, S.status_reason)
    )


async def claim_batch_in(conn: AsyncConnection, upstream: str, asks: Sequence[ClaimAsk], owner: str, ttl_s: float,
                         holder_dead: Callable[[str], bool]) -> list[ClaimOutcome]:
    """Inside one transaction: each ask's `Claim`, or its `LeaseHeld`, in the asks' order (one ask per session)."""
    session_ids, directories = sorted_rows(asks)
    await conn.execute(ensure_sessions(upstream, session_ids, directories))
    rows = list(await conn.execute(lock_leases(upstream, session_ids)))
    locked = {str(r.session_id): LeaseView(r.lease_owner, int(r.lease_epoch), r.lease_expires_at, bool(r.deleted))
              for r in rows}
    if len(locked) < len(session_ids):  # rare: an erased session, whose row the insert trigger refused
        for sid in await erased_among(conn, upstream, [s for s in session_ids if s not in locked]):
            locked[sid] = LeaseView(None, 0, None, deleted=True)
    if not locked:
        return [LookupError(f"session {a.session_id!r}: no row after ensuring it") for a in asks]
    now = rows[0].now if rows else (await conn.execute(select(func.now()))).scalar_one()
    verdicts = decide_batch(asks, locked, owner, now, holder_dead)
    takers = sorted(sid for sid, v in verdicts.items() if v.takes)
    taken = {str(r.session_id): r for r in await conn.execute(take_leases(upstream, takers, owner, ttl_s))} \
        if takers else {}
    out: list[ClaimOutcome] = []
    for a in asks:
        verdict = verdicts.get(a.session_id)
        row = taken.get(a.session_id)
        if verdict is None or (verdict.takes and row is None):
            out.append(LookupError(f"session {a.session_id!r}: no row after ensuring it"))
        elif row is None:
            out.append(LeaseHeld(a.session_id, verdict, locked[a.session_id].owner))
        else:
            out.append(Claim(int(row.lease_epoch), int(row.cursor_seq), verdict, locked[a.session_id].owner,
                             str(row.status), row.status_reason))
    return out
