"""Day partitions of `chat_session_events` (docs/lifecycle.md, "Partitions"), kept by the bridge itself.

The table is `PARTITION BY RANGE (session_day)` (migration 0018): one partition a day,
`chat_session_events_pYYYYMMDD`, the legacy partition (every row stored before 0018, day `1970-01-01`) and
the default partition, where a row whose day has no partition goes. Every process makes today's partition
and the next `AHEAD` days' at start and then every `INTERVAL_S`: a new session's day is today (UTC), so its
partition is there before its first event. Creating a partition takes a short lock on the table: bounded
by `lock_timeout` (a busy moment skips the round; the next one makes it). Rows in the default partition are
counted and said (metric, log): a day can then no longer get its partition until they leave
(`opencode-bridge partition-migrate` moves them).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta

import structlog
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bridge import metrics

PARENT = "chat_session_events"
LEGACY = "chat_session_events_legacy"
DEFAULT = "chat_session_events_default"
LEGACY_DAY = date(1970, 1, 1)  # before any session; not date.min, which asyncpg sends as -infinity
AHEAD = 2  # days after today made ahead
INTERVAL_S = 3600.0
LOCK_TIMEOUT = "2s"

_log = structlog.get_logger("bridge.store.partitions")

_DAY_PARTITIONS = text("""
SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'chat_session_events'::regclass
ORDER BY c.relname
""")


def partition_name(day: date) -> str:
    return f"{PARENT}_p{day:%Y%m%d}"


def day_of_partition(name: str) -> date | None:
    """The day of a day partition's name; None for the legacy and default partitions (or anything else)."""
    prefix = f"{PARENT}_p"
    if not name.startswith(prefix) or len(name) != len(prefix) + 8 or not name[len(prefix):].isdigit():
        return None
    return datetime.strptime(name[len(prefix):], "%Y%m%d").replace(tzinfo=UTC).date()


def utc_today() -> date:
    return datetime.now(UTC).date()


async def day_partitions(conn: AsyncConnection) -> dict[date, str]:
    """The day partitions there are: day -> table name."""
    out: dict[date, str] = {}
    for r in await conn.execute(_DAY_PARTITIONS):
        day = day_of_partition(str(r.relname))
        if day is not None:
            out[day] = str(r.relname)
    return out


async def create_day(conn: AsyncConnection, day: date) -> bool:
    """Create `day`'s partition unless it is there (the caller's transaction); True if created."""
    if day == LEGACY_DAY:
        return False
    if (await conn.execute(text("SELECT to_regclass(:n)"), {"n": partition_name(day)})).scalar() is not None:
        return False
    nxt = day + timedelta(days=1)
    await conn.execute(text(f"CREATE TABLE {partition_name(day)} PARTITION OF {PARENT} "
                            f"FOR VALUES FROM ('{day.isoformat()}') TO ('{nxt.isoformat()}')"))
    return True


async def dated_partitions(conn: AsyncConnection) -> dict[date, str]:
    """The day partitions and the legacy one (its day `LEGACY_DAY`): what retention may drop whole."""
    out = await day_partitions(conn)
    if (await conn.execute(text("SELECT to_regclass(:n)"), {"n": LEGACY})).scalar() is not None:
        out[LEGACY_DAY] = LEGACY
    return out


async def detach_and_drop_in(conn: AsyncConnection, name: str) -> None:
    """DETACH and DROP in the caller's transaction (which has set `lock_timeout`): the table's lock is held
    from here to the commit, so this comes last."""
    await conn.execute(text(f"ALTER TABLE {PARENT} DETACH PARTITION {name}"))
    await conn.execute(text(f"DROP TABLE {name}"))


async def detach_and_drop(engine: AsyncEngine, name: str) -> None:
    """Detach a partition and drop it. Not `DETACH … CONCURRENTLY`: PostgreSQL refuses it while the table
    has a default partition. The plain DETACH holds the table's lock for a catalog change only (no scan: a
    detached range needs no check); `lock_timeout` bounds how long writers can queue behind it."""
    async with engine.begin() as conn:
        await conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
        await conn.execute(text(f"ALTER TABLE {PARENT} DETACH PARTITION {name}"))
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP TABLE {name}"))


async def default_rows(conn: AsyncConnection) -> int:
    return int((await conn.execute(text(f"SELECT count(*) FROM {DEFAULT}"))).scalar_one())


async def ensure_partitions(engine: AsyncEngine, today: date | None = None, ahead: int = AHEAD) -> list[date]:
    """Today's partition and the next `ahead` days', each in its own short transaction; the days created.
    A day that cannot be made now (the lock not granted in time, a row of that day in the default
    partition) is logged and counted, and tried again at the next round."""
    today = today or utc_today()
    made: list[date] = []
    for n in range(ahead + 1):
        day = today + timedelta(days=n)
        try:
            async with engine.begin() as conn:
                await conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
                if await create_day(conn, day):
                    made.append(day)
        except DBAPIError as e:
            metrics.PARTITION_ERRORS.labels(step="create").inc()
            _log.warning("partition_not_created", day=day.isoformat(), error=str(e.orig)[:300])
    if made:
        metrics.PARTITIONS_CREATED.inc(len(made))
        _log.info("partitions_created", days=[d.isoformat() for d in made])
    async with engine.connect() as conn:
        strays = await default_rows(conn)
    metrics.PARTITION_DEFAULT_ROWS.set(strays)
    if strays:
        _log.warning("partition_default_rows", rows=strays,
                     detail="event rows of a day without its partition: opencode-bridge partition-migrate moves them")
    return made


class PartitionKeeper:
    """`ensure_partitions` at start (`ensure`) and then every `interval_s` (`run`, a daemon part)."""

    def __init__(self, engine: AsyncEngine, interval_s: float = INTERVAL_S) -> None:
        self._engine = engine
        self._interval_s = interval_s

    async def ensure(self) -> list[date]:
        return await ensure_partitions(self._engine)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.ensure()
            except (DBAPIError, OSError) as e:  # the database away: the next round tries again
                metrics.PARTITION_ERRORS.labels(step="round").inc()
                _log.warning("partition_round_failed", error=str(e)[:300])
