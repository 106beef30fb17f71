"""A retention run (docs/lifecycle.md, "Retention"; runbook in docs/operations.md): whole sessions whose last
event is older than the cutoff leave the mirror with every row that refers to them.

First by partition, a day at a time (days before the cutoff's), one transaction each:

    BEGIN; lock every session of the day (SKIP LOCKED); each must be of this upstream and qualify, else
        the day stays for the path below; [--archive-to] their archives; delete their rows from the other
        tables; DETACH and DROP the day's partition of events (lock_timeout: a busy moment leaves the day
        to the path below); COMMIT

then the sessions left, in batches of `batch` sessions, one transaction each:

    read a page of candidates (bridge.store.lifecycle.retire: not warm, nothing pending)
    [--archive-to] write each one's archive file (bridge.lifecycle.archive), before anything is deleted
    BEGIN; lock the candidates that still qualify and whose cursor did not move (SKIP LOCKED); delete their
        rows, table by table (bridge.store.lifecycle.removal); COMMIT

A session that became warm, got a pending request or a new event in between stays (it is `skipped`, its
archive file, if any, is simply written again by the next run). Nothing is tombstoned: a retired session
the serve still has and that becomes active again is mirrored again from its sync log, whole.

Chains are per session (docs/audit.md), so the chain of every session that stays verifies as before.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import structlog
from sqlalchemy import Text, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.lifecycle.archive import archive_session
from bridge.store import partitions
from bridge.store.lifecycle import remove_sessions, retire_candidates
from bridge.store.lifecycle.retire import lock_day, lock_retirable
from bridge.store.reads import AuditReader

_log = structlog.get_logger("bridge.lifecycle")

_COUNT_EVENTS = text("SELECT count(*) FROM chat_session_events WHERE upstream = :upstream "
                     "AND session_id = ANY(:ids) AND session_day = ANY(ARRAY(SELECT d.session_day FROM "
                     "chat_sessions d WHERE d.upstream = :upstream AND d.session_id = ANY(:ids)))")


@dataclass
class RetentionReport:
    cutoff: datetime
    dry_run: bool
    sessions: int = 0  # removed (dry run: would be removed)
    rows: Counter[str] = field(default_factory=Counter)  # by table (dry run: events only)
    skipped: int = 0  # candidates that stopped qualifying before their batch's transaction
    archived: int = 0
    seconds: float = 0.0
    days_dropped: list[str] = field(default_factory=list)  # partitions dropped whole

    def log_fields(self) -> dict[str, object]:
        return {"cutoff": self.cutoff.isoformat(), "dry_run": self.dry_run, "sessions": self.sessions,
                "days_dropped": len(self.days_dropped),
                "rows": sum(self.rows.values()), "events": self.rows.get("chat_session_events", 0),
                "skipped": self.skipped, "archived": self.archived, "seconds": round(self.seconds, 3)}


async def run_retention(engine: AsyncEngine, reader: AuditReader, upstream: str, cutoff: datetime, *,
                        dry_run: bool = False, archive_to: Path | None = None, batch: int = 100) -> RetentionReport:
    report = RetentionReport(cutoff, dry_run)
    started = time.monotonic()
    if not dry_run:
        await _drop_days(engine, reader, upstream, cutoff, archive_to, report)
    after = ""
    while True:
        async with engine.connect() as conn:
            page = await retire_candidates(conn, upstream, cutoff, after=after, limit=batch)
            if dry_run and page:
                page_ids = bindparam("ids", [c.session_id for c in page], type_=ARRAY(Text))
                n = (await conn.execute(_COUNT_EVENTS.bindparams(page_ids, upstream=upstream))).scalar_one()
                report.rows["chat_session_events"] += int(n)
        if not page:
            break
        after = page[-1].session_id
        if dry_run:
            report.sessions += len(page)
            continue
        if archive_to is not None:
            for c in page:
                await archive_session(reader, c.session_id, archive_to)
                report.archived += 1
        async with engine.begin() as conn:
            ids = await lock_retirable(conn, upstream, cutoff, page)
            counts = await remove_sessions(conn, upstream, ids)
        report.sessions += len(ids)
        report.skipped += len(page) - len(ids)
        for tables in counts.values():
            report.rows.update(tables)
    report.seconds = time.monotonic() - started
    _log.info("retention_run", **report.log_fields())
    return report


_DAY_LEFT = text("SELECT count(*) FROM chat_sessions WHERE session_day = :day")


class _DayChanged(Exception):
    """A day's sessions changed while it was being dropped: the transaction is rolled back."""


async def _drop_days(engine: AsyncEngine, reader: AuditReader, upstream: str, cutoff: datetime,
                     archive_to: Path | None, report: RetentionReport) -> None:
    """Every day partition before the cutoff's day whose sessions all leave: dropped whole."""
    async with engine.connect() as conn:
        days = await partitions.dated_partitions(conn)
    for day, name in sorted(days.items()):
        if day >= cutoff.date():
            continue
        try:
            async with engine.begin() as conn:
                await conn.execute(text(f"SET LOCAL lock_timeout = '{partitions.LOCK_TIMEOUT}'"))
                ids = await lock_day(conn, upstream, cutoff, day)
                if ids is None:
                    continue
                if archive_to is not None:
                    for sid in ids:
                        await archive_session(reader, sid, archive_to)
                    report.archived += len(ids)
                events = int((await conn.execute(text(f"SELECT count(*) FROM {name}"))).scalar_one())
                counts = await remove_sessions(conn, upstream, ids, skip=("chat_session_events",))
                await partitions.detach_and_drop_in(conn, name)
                # A session moved into the day meanwhile (partition-migrate) committed before the DETACH
                # got its lock: seen now, and everything rolls back.
                if int((await conn.execute(_DAY_LEFT, {"day": day})).scalar_one()):
                    raise _DayChanged(day)
        except (DBAPIError, _DayChanged) as e:  # the day's sessions take the DELETE path
            reason = str(e.orig)[:300] if isinstance(e, DBAPIError) else "a session joined the day"
            _log.warning("retention_partition_kept", day=day.isoformat(), error=reason)
            continue
        report.sessions += len(ids)
        report.rows["chat_session_events"] += events
        for tables in counts.values():
            report.rows.update(tables)
        report.days_dropped.append(day.isoformat())
