"""The batch writer and the session/lease rows, for one upstream. SQL lives in `bridge.store.queries`.

Connection-level failures (PostgreSQL restarted, connection killed) propagate as
`sqlalchemy.exc.DBAPIError`; the transaction is then rolled back by PostgreSQL, so neither events nor the
cursor moved and the caller retries the same batch from its stored cursor.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge.errors import LeaseLost
from bridge.events import ChatEvent
from bridge.log import get_logger
from bridge.store import audit as audit_q
from bridge.store import fanout as fanout_q
from bridge.store import leases
from bridge.store import queries as q
from bridge.store.payload import exact_json_text, same_json, storable_text
from bridge.store.rows import PreparedEvent, prepare_event

# Called inside write_batch's transaction after the rows are inserted and before the cursor moves:
# a seam for fault injection in tests (kill the connection there, the cursor must not have moved).
WriteHook = Callable[[AsyncConnection], Awaitable[None]]

REASON_CONFLICTING_DUPLICATE = "conflicting_duplicate"
REASON_LOSSY_PAYLOAD = "lossy_payload"


@dataclass(frozen=True)
class BatchResult:
    inserted: int  # new rows in chat_session_events
    duplicates: int  # identical rows already stored (same seq, event id and payload): benign
    rejected: int  # conflicting duplicates / unstorable events, kept in chat_event_rejects
    cursor_seq: int  # the stored cursor after the commit


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    directory: str | None
    cursor_seq: int
    status: str
    deleted: bool
    lease_owner: str | None
    lease_epoch: int
    status_reason: str | None = None
    first_event_at: datetime | None = None
    last_event_at: datetime | None = None
    deleted_at: datetime | None = None
    incomplete: bool = False


@dataclass
class _Outcome:
    inserted: list[PreparedEvent] = field(default_factory=list)
    duplicates: int = 0
    conflicts: list[tuple[PreparedEvent, list[dict[str, Any]]]] = field(default_factory=list)


class EventStore:
    def __init__(self, engine: AsyncEngine, upstream: str, *, before_cursor_update: WriteHook | None = None) -> None:
        self._engine = engine
        self._upstream = upstream
        self._before_cursor_update = before_cursor_update
        self._log = get_logger(upstream=upstream)

    @property
    def upstream(self) -> str:
        return self._upstream

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    async def claim(
        self,
        session_id: str,
        owner: str,
        directory: str | None = None,
        *,
        lease_ttl_s: float = 15.0,
        holder_dead: Callable[[str], bool] = lambda _owner: False,
    ) -> tuple[int, int]:
        """Upsert the session row and take the lease if it is free, expired, ours, or its holder is known
        dead (bridge.sessions.lease.decide_claim): lease_epoch += 1, lease_owner = owner, expiry = now +
        lease_ttl_s. Raises `LeaseHeld` otherwise. Returns (epoch, cursor_seq)."""
        async with self._engine.begin() as conn:
            taken = await leases.claim_in(conn, self._upstream, session_id, owner, directory, lease_ttl_s, holder_dead)
        return taken.epoch, taken.cursor_seq

    async def write_batch(
        self, session_id: str, epoch: int, events: Sequence[ChatEvent], received_at: datetime
    ) -> BatchResult:
        """One transaction: lock the session row, check lease_epoch == epoch (else LeaseLost),
        INSERT ... ON CONFLICT DO NOTHING, conflicting duplicates -> chat_event_rejects,
        cursor_seq = max(cursor_seq, max seq of the batch), last_event_at. COMMIT.

        A released lease (lease_owner NULL) is lost too. Raises ValueError, before touching the database,
        for an event without a durable seq."""
        prepared = [prepare_event(self._upstream, session_id, e, received_at) for e in events]
        async with self._engine.begin() as conn:
            lease = (await conn.execute(q.lock_session_for_write(self._upstream, session_id))).one_or_none()
            if lease is None or lease.lease_epoch != epoch or lease.lease_owner is None:
                held = None if lease is None else (lease.lease_epoch, lease.lease_owner)
                raise LeaseLost(f"session {session_id!r}: epoch {epoch} presented, lease is {held!r}")
            if not prepared:
                return BatchResult(0, 0, 0, int(lease.cursor_seq))
            outcome = await self._insert(conn, session_id, prepared)
            # Tamper evidence (docs/audit.md): extend the session's hash chain under the row lock held above.
            await audit_q.chain_new_events(conn, self._upstream, session_id, [p.seq for p in outcome.inserted])
            rejects = self._reject_rows(session_id, outcome, received_at)
            if rejects:
                await conn.execute(q.insert_rejects(rejects))
            if self._before_cursor_update is not None:
                await self._before_cursor_update(conn)
            times = [p.event_time or received_at for p in prepared]
            cursor = (
                await conn.execute(
                    q.advance_cursor(self._upstream, session_id, max(p.seq for p in prepared), min(times), max(times))
                )
            ).scalar_one()
            # Delivered by PostgreSQL only if and when this transaction commits (WebSocket fan-out, #3).
            await conn.execute(fanout_q.notify_committed(self._upstream, session_id, max(p.seq for p in prepared)))
        self._log_conflicts(session_id, outcome)
        return BatchResult(
            inserted=len(outcome.inserted),
            duplicates=outcome.duplicates,
            rejected=len(outcome.conflicts),
            cursor_seq=int(cursor),
        )

    async def _insert(self, conn: AsyncConnection, session_id: str, prepared: list[PreparedEvent]) -> _Outcome:
        result = await conn.execute(q.insert_events(), [p.row for p in prepared])
        returned: Counter[tuple[int, str]] = Counter((int(r.seq), str(r.event_id)) for r in result)
        outcome = _Outcome()
        skipped: list[PreparedEvent] = []
        for p in prepared:
            if returned[(p.seq, p.event_id)] > 0:
                returned[(p.seq, p.event_id)] -= 1
                outcome.inserted.append(p)
            else:
                skipped.append(p)
        if skipped:
            await self._classify_skipped(conn, session_id, skipped, outcome)
        return outcome

    async def _classify_skipped(
        self, conn: AsyncConnection, session_id: str, skipped: list[PreparedEvent], outcome: _Outcome
    ) -> None:
        """A skipped insert is a benign duplicate if the very same event is stored at its seq, else a
        conflicting duplicate (same seq with another id or payload, or its id stored at another seq)."""
        stmt = q.stored_events_matching(
            self._upstream, session_id, [p.seq for p in skipped], [p.event_id for p in skipped]
        )
        stored = [_stored(r) for r in await conn.execute(stmt)]
        at_seq = {s["seq"]: s for s in stored if s["session_id"] == session_id}
        with_id = {s["event_id"]: s for s in stored}
        for p in skipped:
            here = at_seq.get(p.seq)
            if here is not None and here["event_id"] == p.event_id and same_json(here["payload"], p.payload):
                outcome.duplicates += 1
                continue
            clashes = [here] if here is not None else []
            elsewhere = with_id.get(p.event_id)
            if elsewhere is not None and elsewhere is not here:
                clashes.append(elsewhere)
            outcome.conflicts.append((p, clashes))

    def _reject_rows(self, session_id: str, outcome: _Outcome, received_at: datetime) -> list[dict[str, Any]]:
        rows = [
            self._reject_row(
                session_id,
                p,
                REASON_LOSSY_PAYLOAD,
                "stored with unstorable characters replaced (payload_lossy); raw is the exact envelope",
                received_at,
            )
            for p in outcome.inserted
            if p.lossy
        ]
        for p, clashes in outcome.conflicts:
            detail = {
                "incoming": {"seq": p.seq, "event_id": p.event_id},
                "stored": [
                    {
                        "session_id": s["session_id"],
                        "seq": s["seq"],
                        "event_id": s["event_id"],
                        "same_payload": same_json(s["payload"], p.payload),
                    }
                    for s in clashes
                ],
            }
            rows.append(self._reject_row(session_id, p, REASON_CONFLICTING_DUPLICATE, json.dumps(detail), received_at))
        return rows

    def _reject_row(
        self, session_id: str, p: PreparedEvent, reason: str, detail: str, received_at: datetime
    ) -> dict[str, Any]:
        return {
            "upstream": self._upstream,
            "session_id": session_id,
            "seq": p.seq,
            "event_id": p.event_id,
            "reason": reason,
            "detail": detail,
            "raw": p.exact_json(),
            "received_at": received_at,
        }

    def _log_conflicts(self, session_id: str, outcome: _Outcome) -> None:
        for p, clashes in outcome.conflicts:
            self._log.error(
                "conflicting_duplicate",
                session_id=session_id,
                seq=p.seq,
                event_id=p.event_id,
                stored=[(s["session_id"], s["seq"], s["event_id"]) for s in clashes],
            )

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
            "session_id": _opt_text(session_id),
            "seq": seq,
            "event_id": _opt_text(event_id),
            "reason": storable_text(reason).value,
            "detail": _opt_text(detail),
            "raw": raw,
            "received_at": received_at,
        }
        async with self._engine.begin() as conn:
            await conn.execute(q.insert_rejects([row]))

    async def mark_deleted(self, session_id: str) -> None:
        async with self._engine.begin() as conn:
            row = (await conn.execute(q.mark_session_deleted(self._upstream, session_id))).one_or_none()
            if row is not None:  # newly deleted: tell every process's subscribers
                await conn.execute(fanout_q.notify_status(self._upstream, session_id, row.status, row.status_reason,
                                                          int(row.status_version)))

    async def sessions(self, include_deleted: bool = False) -> list[SessionRow]:
        async with self._engine.connect() as conn:
            result = await conn.execute(q.select_sessions(self._upstream, include_deleted))
            return [_session_row(r) for r in result]

    async def get_session(self, session_id: str) -> SessionRow | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(q.select_session(self._upstream, session_id))).one_or_none()
        return None if row is None else _session_row(row)

    async def release(self, session_id: str, epoch: int) -> None:
        """Give the lease up if it is still ours (lease_owner = NULL); history and cursor stay."""
        async with self._engine.begin() as conn:
            await conn.execute(q.release_session(self._upstream, session_id, epoch))

    async def stored_ids(self, session_id: str) -> list[tuple[int, str]]:
        """(seq, event_id) of every stored event of the session, ordered by seq (tests, verify)."""
        async with self._engine.connect() as conn:
            result = await conn.execute(q.select_stored_ids(self._upstream, session_id))
            return [(int(r.seq), str(r.event_id)) for r in result]


    async def seed_rows(self, session_id: str, kinds: Sequence[str]) -> list[dict[str, Any]]:
        """`event_id, kind, part_id, message_id, assistant_message_id` of the session's rows of these kinds,
        in seq order (a follower rebuilds its legacy turn state from them, bridge.legacy.SEED_KINDS)."""
        async with self._engine.connect() as conn:
            result = await conn.execute(q.select_seed_rows(self._upstream, session_id, kinds))
            return [dict(r._mapping) for r in result]


def _stored(row: Row[Any]) -> dict[str, Any]:
    return {
        "session_id": row.session_id,
        "seq": int(row.seq),
        "event_id": row.event_id,
        "payload": row.payload,
    }


def _opt_text(value: str | None) -> str | None:
    return None if value is None else storable_text(value).value


def _session_row(row: Row[Any]) -> SessionRow:
    return SessionRow(
        session_id=row.session_id,
        directory=row.directory,
        cursor_seq=int(row.cursor_seq),
        status=row.status,
        deleted=bool(row.deleted),
        lease_owner=row.lease_owner,
        lease_epoch=int(row.lease_epoch),
        status_reason=row.status_reason,
        first_event_at=row.first_event_at,
        last_event_at=row.last_event_at,
        deleted_at=row.deleted_at,
        incomplete=bool(row.incomplete),
    )
