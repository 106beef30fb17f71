"""SQL of the leases on `chat_sessions` (renew, hand-off, release; the claim is
bridge.store.chat_sessions.claims, what the adoption sweep reads .adoption) and of the incarnation
heartbeats; `LeaseStore` executes them and the status statements (bridge.store.chat_sessions.status).

All lease times use the database clock (`now()`), so replicas with skewed clocks still agree on expiry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Insert, Select, Update, and_, false, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncEngine

import bridge.store.chat_sessions.status as st
from bridge.lease import nobody_dead
from bridge.store.chat_sessions.adoption import read_adoption_candidates
from bridge.store.chat_sessions.claims import claim_batch_in, ttl_from_now
from bridge.store.chat_sessions.reader import read_session
from bridge.store.chat_sessions.status_batch import StatusWrite, lock_sessions, set_statuses_if_owner, set_titles
from bridge.store.codecs import SessionRow, row_dict, session_row
from bridge.store.notices import notify_status
from bridge.store.ports.leases import Claim, ClaimAsk, ClaimOutcome
from bridge.store.ports.status import TurnState as TurnState  # re-exported: the record is the port's
from bridge.store.schema import bridge_incarnations, chat_sessions, session_key

S = chat_sessions.c
I = bridge_incarnations.c  # noqa: E741 - the table's column namespace, as S and E elsewhere


# --- statements ---------------------------------------------------------------------------------------


def release_session(upstream: str, session_id: str, epoch: int) -> Update:
    """Give the lease up if it is still ours (lease_owner = NULL); history and cursor stay."""
    return (
        chat_sessions.update()
        .where(session_key(upstream, session_id), S.lease_epoch == epoch)
        .values(lease_owner=None, lease_expires_at=None, updated_at=func.now())
    )


def renew_leases(upstream: str, owner: str, ttl_s: float) -> Update:
    """Renew every lease we still hold; what is not returned is no longer ours.

    Expired ones too: a lease that lapsed (a heartbeat stuck behind a busy pool, a paused process) but that
    nobody took is still ours -- its epoch did not move, so no other writer exists and our writes were never
    fenced. A peer that takes it sets a new owner (and epoch) under the row lock, and then this no longer
    matches: renewing can never revive a lease someone else holds."""
    ours = _locked_in_order(S.upstream == upstream, S.lease_owner == owner, S.deleted == false())
    return (
        chat_sessions.update()
        .where(S.upstream == ours.c.upstream, S.session_id == ours.c.session_id)
        .values(lease_expires_at=ttl_from_now(ttl_s))
        .returning(S.session_id, S.lease_epoch)
    )


def _locked_in_order(*where: Any) -> Any:
    """The rows, locked in session_id order: a group commit locks its sessions in that order too
    (bridge.store.writes.transaction), so a statement touching many session rows never deadlocks with it."""
    return (
        select(S.upstream, S.session_id).where(*where).order_by(S.upstream, S.session_id).with_for_update()
        .subquery()
    )


def hand_off_leases(upstream: str, owner: str) -> Update:
    """Clean shutdown: expire our leases now (owner kept), so peers see orphans and adopt at once.
    (A *release* clears the owner instead: nobody needs to follow that session.)"""
    ours = _locked_in_order(S.upstream == upstream, S.lease_owner == owner)
    return (
        chat_sessions.update()
        .where(S.upstream == ours.c.upstream, S.session_id == ours.c.session_id)
        .values(lease_expires_at=func.now(), updated_at=func.now())
    )


def upsert_incarnation(incarnation_id: str, upstream: str, hostname: str, pid: int, ttl_s: float) -> Insert:
    stmt = pg_insert(bridge_incarnations).values(
        incarnation_id=incarnation_id, upstream=upstream, hostname=hostname, pid=pid, expires_at=ttl_from_now(ttl_s)
    )
    return stmt.on_conflict_do_update(
        index_elements=[I.incarnation_id], set_={"heartbeat_at": func.now(), "expires_at": ttl_from_now(ttl_s)}
    )


def stop_incarnation(incarnation_id: str) -> Update:
    return (
        bridge_incarnations.update()
        .where(I.incarnation_id == incarnation_id)
        .values(stopped_at=func.now(), expires_at=func.now())
    )


def select_incarnations(upstream: str) -> Select[Any]:
    alive = and_(I.stopped_at.is_(None), I.expires_at > func.now()).label("alive")
    return select(I.incarnation_id, I.hostname, I.pid, I.heartbeat_at, I.stopped_at, alive).where(
        I.upstream == upstream
    )


# --- execution ----------------------------------------------------------------------------------------


class LeaseStore:
    """The PostgreSQL side of the lease port and of the status port (bridge.store.ports: LeasePort,
    SessionStatusPort; `EventStore` hands its claims and releases on to it).

    `liveness_engine`, when given, carries only the heartbeat and the hand-off: a small pool of its own,
    so that renewing our leases never waits behind a burst of write batches on the main pool (a heartbeat
    queued past the TTL would let peers adopt sessions we are still following)."""

    def __init__(self, engine: AsyncEngine, upstream: str, liveness_engine: AsyncEngine | None = None) -> None:
        self._engine = engine
        self._liveness = liveness_engine or engine
        self._upstream = upstream

    async def claim(self, session_id: str, owner: str, directory: str | None = None, *, lease_ttl_s: float = 15.0,
                    holder_dead: Callable[[str], bool] = nobody_dead) -> tuple[int, int]:
        """Upsert the session row and take the lease if it is free, expired, ours, or its holder is known
        dead (bridge.lease.decide_claim): lease_epoch += 1, lease_owner = owner, expiry = now +
        lease_ttl_s. Raises `LeaseHeld` otherwise. Returns (epoch, cursor_seq)."""
        (outcome,) = await self.claim_many([ClaimAsk(session_id, directory)], owner, lease_ttl_s=lease_ttl_s,
                                           holder_dead=holder_dead)
        if isinstance(outcome, Claim):
            return outcome.epoch, outcome.cursor_seq
        raise outcome

    async def claim_many(self, asks: Sequence[ClaimAsk], owner: str, *, lease_ttl_s: float = 15.0,
                         holder_dead: Callable[[str], bool] = nobody_dead) -> list[ClaimOutcome]:
        """`claim` for many sessions (one ask each) in one transaction: each ask's `Claim` (with the stored
        status), `LeaseHeld`, or error, in the asks' order (bridge.store.chat_sessions.claims). A failure
        of the transaction itself (the database away) raises."""
        async with self._engine.begin() as conn:
            return await claim_batch_in(conn, self._upstream, asks, owner, lease_ttl_s, holder_dead)

    async def release(self, session_id: str, epoch: int) -> None:
        """Give the lease up if it is still ours (lease_owner = NULL); history and cursor stay."""
        async with self._engine.begin() as conn:
            await conn.execute(release_session(self._upstream, session_id, epoch))

    async def stored_cursor(self, session_id: str) -> int | None:
        """The session's cursor as the database has it now (None: no such row), on the main pool."""
        async with self._engine.connect() as conn:
            row = await read_session(conn, self._upstream, session_id)
        return None if row is None else row.cursor_seq

    async def mark_deleted(self, session_id: str) -> None:
        async with self._engine.begin() as conn:
            row = (await conn.execute(st.mark_session_deleted(self._upstream, session_id))).one_or_none()
            if row is not None:  # newly deleted: tell every process's subscribers
                await conn.execute(notify_status(self._upstream, session_id, row.status, row.status_reason,
                                                 int(row.status_version)))

    async def register(self, incarnation_id: str, hostname: str, pid: int, ttl_s: float) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(upsert_incarnation(incarnation_id, self._upstream, hostname, pid, ttl_s))

    async def heartbeat(self, incarnation_id: str, hostname: str, pid: int, ttl_s: float) -> dict[str, int]:
        """Renew the incarnation row and every lease still ours; returns {session_id: epoch} held."""
        async with self._liveness.begin() as conn:
            await conn.execute(upsert_incarnation(incarnation_id, self._upstream, hostname, pid, ttl_s))
            renewed = renew_leases(self._upstream, incarnation_id, ttl_s).cte("renewed")
            # Two arrays in one row, not a row per lease: 10,000 rows through the result layer every 5 s
            # were the largest share of a warm idle daemon's CPU (BENCHMARKS.md, "The daemon on the real wire").
            ids, epochs = (await conn.execute(select(func.array_agg(renewed.c.session_id),
                                                     func.array_agg(renewed.c.lease_epoch)))).one()
            return dict(zip(ids or (), epochs or (), strict=True))

    async def hand_off(self, incarnation_id: str) -> None:
        async with self._liveness.begin() as conn:
            await conn.execute(hand_off_leases(self._upstream, incarnation_id))
            await conn.execute(stop_incarnation(incarnation_id))

    async def adoption_candidates(self, me: str, holder_dead: Callable[[str], bool] = nobody_dead) -> list[SessionRow]:
        """`session_id`, `directory`, `lease_owner` (None: free, last known running) and `lease_expired`
        (by the database clock) of the sessions the sweep may adopt (bridge.sessions.sweep): expired leases,
        free sessions last known running, and the sessions of live holders `holder_dead` judges dead (each
        holder asked once; bridge.store.chat_sessions.adoption)."""
        async with self._engine.connect() as conn:
            return await read_adoption_candidates(conn, self._upstream, me, holder_dead)

    async def turn_state(self, session_id: str, limit: int = 200) -> TurnState:
        """What a new owner needs to continue the status machine where the previous one stopped."""
        async with self._engine.connect() as conn:
            now = (await conn.execute(st.select_status(self._upstream, session_id))).one_or_none()
            rows = list(await conn.execute(st.select_turn_tail(self._upstream, session_id, limit)))
        kinds: list[str] = []
        for r in rows:  # newest first: stop at the last prompt
            kinds.append(str(r.kind))
            if r.kind in ("prompt:admitted", "prompt:started"):
                break
        kinds.reverse()
        if now is None:
            return TurnState("idle", None, kinds)
        return TurnState(str(now.status), now.status_reason, kinds)

    async def set_status(self, session_id: str, owner: str, status: str, reason: str | None) -> bool:
        async with self._engine.begin() as conn:
            version = (await conn.execute(
                st.set_status_if_owner(self._upstream, session_id, owner, status, reason))).scalar_one_or_none()
            if version is None:
                return False
            await conn.execute(notify_status(self._upstream, session_id, status, reason, int(version)))
            return True

    async def park(self, session_id: str, owner: str, reason: str) -> bool:
        async with self._engine.begin() as conn:
            version = (await conn.execute(
                st.park_if_free_or_ours(self._upstream, session_id, owner, reason))).scalar_one_or_none()
            if version is None:
                return False
            await conn.execute(notify_status(self._upstream, session_id, "parked", reason, int(version)))
            return True

    async def parked(self) -> list[SessionRow]:
        """Every parked session, its reason in `status_reason` (operators: `opencode-bridge doctor`)."""
        async with self._engine.connect() as conn:
            return [session_row(r) for r in await conn.execute(st.select_parked(self._upstream))]

    async def record_gap(self, session_id: str, from_seq: int, to_seq: int) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(st.insert_gap(self._upstream, session_id, from_seq, to_seq))
            await conn.execute(st.mark_incomplete(self._upstream, session_id))

    async def set_title(self, session_id: str, title: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(st.set_title(self._upstream, session_id, title))

    async def write_activity(self, owner: str, rounds: Sequence[Sequence[StatusWrite]],
                             titles: Sequence[tuple[str, str]]) -> list[set[str]]:
        """Titles, then rounds of statuses (a session at most once per round), of many sessions in one
        transaction (bridge.store.chat_sessions.status_batch); per round, the sessions written."""
        async with self._engine.begin() as conn:
            await lock_sessions(conn, self._upstream, [t[0] for t in titles] + [w[0] for r in rounds for w in r])
            await set_titles(conn, self._upstream, titles)
            return [await set_statuses_if_owner(conn, self._upstream, owner, r) for r in rounds]

    async def gaps(self, session_id: str) -> list[tuple[int, int]]:
        async with self._engine.connect() as conn:
            rows = await conn.execute(st.select_gaps(self._upstream, session_id))
            return [(int(r.from_seq), int(r.to_seq)) for r in rows]

    async def incarnations(self) -> list[dict[str, Any]]:
        async with self._engine.connect() as conn:
            return [row_dict(r) for r in await conn.execute(select_incarnations(self._upstream))]

