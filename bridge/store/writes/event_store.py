"""The store of one upstream: batches (`write_batch`, through the group committer while `group_commit()`
runs; the transaction itself is `bridge.store.writes.transaction`), rejects, and its session rows: claim
(`bridge.store.chat_sessions.claims`: one session, or many in one transaction) and release
(`bridge.store.chat_sessions.leases`), the deletion tombstone (`bridge.store.chat_sessions.status`), the listings
(`bridge.store.chat_sessions.reader`), each row a `SessionRow` (`bridge.store.codecs`).

Connection-level failures (PostgreSQL restarted, connection killed) propagate as
`sqlalchemy.exc.DBAPIError`; the transaction is then rolled back by PostgreSQL, so neither events nor the
cursor moved and the caller retries the same batch from its stored cursor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

import bridge.store.writes.rejects as q
from bridge.errors import CursorBehind, LeaseLost
from bridge.events import ChatEvent
from bridge.lease import nobody_dead
from bridge.log import get_logger
from bridge.store.chat_sessions import reader
from bridge.store.chat_sessions.leases import LeaseStore
from bridge.store.codecs import SessionRow, opt_text, row_dict, session_row
from bridge.store.payload import exact_json_text, storable_text
from bridge.store.ports.leases import ClaimAsk, ClaimOutcome
from bridge.store.reads import queries as reads
from bridge.store.writes.committer import GroupCommitter
from bridge.store.writes.duplicates import REASON_CONFLICTING_DUPLICATE, REASON_LOSSY_PAYLOAD
from bridge.store.writes.rows import prepare_event
from bridge.store.writes.transaction import (
    BatchResult,
    Behind,
    Fenced,
    SessionWrite,
    WriteHook,
    WriteResult,
    commit_writes,
)

__all__ = [
    "REASON_CONFLICTING_DUPLICATE", "REASON_LOSSY_PAYLOAD", "BatchResult", "EventStore", "LeaseLost", "WriteHook",
]


def lease_lost(session_id: str, fenced: Fenced) -> LeaseLost:
    return LeaseLost(f"session {session_id!r}: epoch {fenced.presented} presented, lease is {fenced.held!r}")


class EventStore:
    def __init__(self, engine: AsyncEngine, upstream: str, *, before_cursor_update: WriteHook | None = None) -> None:
        self._engine = engine
        self._upstream = upstream
        self._before_cursor_update = before_cursor_update
        self._log = get_logger(upstream=upstream)
        self._committer: GroupCommitter | None = None
        self._leases = LeaseStore(engine, upstream)  # the lease port's PostgreSQL side: claims, releases

    @property
    def upstream(self) -> str:
        return self._upstream

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    @property
    def committer(self) -> GroupCommitter | None:
        return self._committer

    @asynccontextmanager
    async def group_commit(self, **bounds: int) -> AsyncIterator[GroupCommitter]:
        """Run the group committer (bridge.store.writes.committer) for as long as the block: every `write_batch`
        of this store (the followers' sinks) commits through it meanwhile, each call returning after the
        COMMIT that holds its batch. On exit, what is queued is committed before it stops."""
        committer = GroupCommitter(self.commit, **bounds)
        async with asyncio.TaskGroup() as tg:
            task = tg.create_task(committer.run(), name="group-commit")
            self._committer = committer
            try:
                yield committer
            finally:
                self._committer = None
                await committer.drain()
                task.cancel()

    async def claim(
        self,
        session_id: str,
        owner: str,
        directory: str | None = None,
        *,
        lease_ttl_s: float = 15.0,
        holder_dead: Callable[[str], bool] = nobody_dead,
    ) -> tuple[int, int]:
        """(epoch, cursor_seq) of the lease taken, or `LeaseHeld` (bridge.store.chat_sessions.LeaseStore.claim)."""
        return await self._leases.claim(session_id, owner, directory, lease_ttl_s=lease_ttl_s, holder_dead=holder_dead)

    async def claim_many(
        self,
        asks: Sequence[ClaimAsk],
        owner: str,
        *,
        lease_ttl_s: float = 15.0,
        holder_dead: Callable[[str], bool] = nobody_dead,
    ) -> list[ClaimOutcome]:
        """`claim` for many sessions in one transaction (bridge.store.chat_sessions.LeaseStore.claim_many)."""
        return await self._leases.claim_many(asks, owner, lease_ttl_s=lease_ttl_s, holder_dead=holder_dead)

    async def write_batch(
        self, session_id: str, epoch: int, events: Sequence[ChatEvent], received_at: datetime,
        *, expected_cursor: int | None = None,
    ) -> BatchResult:
        """One transaction: lock the session row, check lease_epoch == epoch (else LeaseLost),
        INSERT ... ON CONFLICT DO NOTHING, conflicting duplicates -> chat_event_rejects,
        cursor_seq = max(cursor_seq, max seq of the batch), last_event_at. COMMIT.

        A released lease (lease_owner NULL) is lost too. Raises ValueError, before touching the database,
        for an event without a durable seq. While `group_commit()` runs, the batch shares its transaction
        with other sessions' (bridge.store.writes.transaction); a fenced-off batch is refused alone.

        `expected_cursor`: the cursor the writer believes stored; a stored cursor below it (lost commits,
        docs/scaling.md "Failover") refuses the batch with `CursorBehind`."""
        write = self.prepare(session_id, epoch, events, received_at, expected_cursor)
        committer = self._committer
        if committer is not None:  # group commit running (`group_commit()`): one transaction with others
            result = await committer.submit(write)
        else:
            (result,) = await self.commit([write])
        if isinstance(result, Fenced):
            raise lease_lost(session_id, result)
        if isinstance(result, Behind):
            raise CursorBehind(session_id, result.expected, result.stored)
        return result

    def prepare(
        self, session_id: str, epoch: int, events: Sequence[ChatEvent], received_at: datetime,
        expected_cursor: int | None = None,
    ) -> SessionWrite:
        """Rows of a batch (pure; raises ValueError for an event without a durable seq)."""
        upstream = self._upstream
        prepared = [prepare_event(upstream, session_id, e, received_at) for e in events]
        return SessionWrite(session_id, epoch, prepared, received_at, expected_cursor)

    async def commit(self, writes: Sequence[SessionWrite]) -> list[WriteResult]:
        """The writes of one or many sessions in one transaction (bridge.store.writes.transaction): a result
        per write."""
        async with self._engine.begin() as conn:
            results = await commit_writes(conn, self._upstream, writes, self._before_cursor_update, self._log)
        return results

    async def reject_frame(
        self,
        session_id: str | None,
        reason: str,
        raw: str,
        received_at: datetime,
        seq: int | None = None,
        *,
        detail: str | None = None,
        event_id: str | None = None,
    ) -> None:
        """Keep an unusable frame (bad JSON, wrong shape) with its reason in chat_event_rejects.

        A frame with characters `text` cannot hold is kept as a JSON string literal (exact, reversible),
        and the detail says so."""
        cleaned = storable_text(raw)
        if cleaned.lossy:
            raw = exact_json_text(raw)
            detail = "raw is JSON-encoded (unstorable characters)" + (f"; {detail}" if detail else "")
        row = {
            "upstream": self._upstream,
            "session_id": opt_text(session_id),
            "seq": seq,
            "event_id": opt_text(event_id),
            "reason": storable_text(reason).value,
            "detail": opt_text(detail),
            "raw": raw,
            "received_at": received_at,
        }
        async with self._engine.begin() as conn:
            await conn.execute(q.insert_rejects([row]))

    async def mark_deleted(self, session_id: str) -> None:
        await self._leases.mark_deleted(session_id)

    async def sessions(self, include_deleted: bool = False) -> list[SessionRow]:
        async with self._engine.connect() as conn:
            result = await conn.execute(reader.select_sessions(self._upstream, include_deleted))
            return [session_row(r) for r in result]

    async def get_session(self, session_id: str) -> SessionRow | None:
        async with self._engine.connect() as conn:
            return await reader.read_session(conn, self._upstream, session_id)

    async def stored_cursor(self, session_id: str) -> int | None:
        """The session's cursor as the database has it now (None: no such row), on the writers' pool."""
        return await self._leases.stored_cursor(session_id)

    async def release(self, session_id: str, epoch: int) -> None:
        """Give the lease up if it is still ours (lease_owner = NULL); history and cursor stay."""
        await self._leases.release(session_id, epoch)

    async def seed_rows(self, session_id: str, kinds: Sequence[str]) -> list[dict[str, Any]]:
        """`event_id, kind, part_id, message_id, assistant_message_id` of the session's rows of these kinds,
        in seq order (a follower rebuilds its legacy turn state from them, bridge.events.legacy.SEED_KINDS)."""
        async with self._engine.connect() as conn:
            result = await conn.execute(reads.select_seed_rows(self._upstream, session_id, kinds))
            return [row_dict(r) for r in result]

