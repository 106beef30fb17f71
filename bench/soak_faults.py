"""The soak's faults (bench.soak): one every 2-6 s, drawn by weight, against the replicas, the serve and the
database. Each is a method `_<kind>`; `counts` says how many of each ran, `rows_lost` how many event rows
the failovers lost (at least), which the bridges must re-read."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from sqlalchemy import text

from tests.support.bridge_proc import BridgeProcess
from tests.support.opencode import OpencodeServe
from tests.support.replication import ReplicatedPostgres
from tests.support.waiting import WaitTimeout, wait_until

FAULTS = {"kill9_bridge": 4, "sigterm_bridge": 2, "restart_opencode": 1, "kill9_opencode": 1, "drop_db": 2,
          "kill9_worker": 3}
# `--failover`: the database is a primary and a streaming standby (tests/support/replication.py), the bridges
# on a two-host URL; this fault cuts the standby off, lets commits land on the primary only, SIGKILLs the
# primary and promotes the standby (docs/scaling.md, "Failover"), then clones a new standby.
FAILOVER_WEIGHT = 2


async def admin_sql(url: str, sql: str) -> None:
    """One statement outside a transaction (CREATE / DROP DATABASE, pg_terminate_backend)."""
    from sqlalchemy import pool
    from sqlalchemy.ext.asyncio import create_async_engine

    from bridge.store.db import to_async_url

    engine = create_async_engine(to_async_url(url), poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


class Faults:
    """`serve` is set once the soak started it; `replicas` is the soak's own list (restarted in place)."""

    def __init__(self, rng: random.Random, database_url: str, replicas: list[BridgeProcess],
                 pair: ReplicatedPostgres | None = None) -> None:
        self.rng = rng
        self.database_url = database_url
        self.replicas = replicas
        self.pair = pair
        self.serve: OpencodeServe | None = None
        self.weights = {**FAULTS, **({"failover": FAILOVER_WEIGHT} if pair is not None else {})}
        self.counts: Counter[str] = Counter()
        self.rows_lost = 0  # event rows the failovers lost (at least), re-read by the bridges
        self.serve_stops: list[float] = []  # epoch s of every serve stop (a turn it cuts is not resumed)

    async def inject(self, deadline: float) -> None:
        kinds = list(self.weights)
        weights = [self.weights[k] for k in kinds]
        while time.monotonic() < deadline:
            await asyncio.sleep(self.rng.uniform(2.0, 6.0))
            kind = self.rng.choices(kinds, weights)[0]
            self.counts[kind] += 1
            await getattr(self, f"_{kind}")()

    async def _kill9_bridge(self) -> None:
        b = self.rng.choice(self.replicas)
        if b.proc is not None and b.proc.poll() is None:
            b.kill()
        await asyncio.sleep(self.rng.uniform(0.0, 3.0))
        b.start()

    async def _kill9_worker(self) -> None:
        """One worker of a replica (`--workers` > 1, docs/operations.md "Workers") SIGKILLed: its parent starts
        another and the sessions it held are adopted. With one process per replica: the whole replica."""
        b = self.rng.choice(self.replicas)
        if b.proc is None or b.proc.poll() is not None:
            return
        try:
            workers = _children(b.proc.pid)
        except OSError:
            return
        if not workers:
            await self._kill9_bridge()
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.rng.choice(workers), signal.SIGKILL)

    async def _sigterm_bridge(self) -> None:
        b = self.rng.choice(self.replicas)
        b.stop()
        b.start()

    async def _restart_opencode(self) -> None:
        assert self.serve is not None
        self.serve_stops.append(time.time())
        await self.serve.restart()

    async def _kill9_opencode(self) -> None:
        assert self.serve is not None
        self.serve_stops.append(time.time())
        await self.serve.restart(kill=True)

    async def _drop_db(self) -> None:
        await admin_sql(self.database_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                           "WHERE application_name LIKE 'opencode-bridge%'")

    async def _failover(self) -> None:
        pair = self.pair
        assert pair is not None
        count = "SELECT count(*) FROM chat_session_events"
        await asyncio.to_thread(pair.detach_standby)
        kept = int(await asyncio.to_thread(pair.psql, pair.standby, count, "bridge"))
        # Commits now land on the primary only: wait (a little) until some do, so that the failover loses them.
        with contextlib.suppress(WaitTimeout):
            await wait_until(lambda: int(pair.psql(pair.primary, count, "bridge")) > kept, 10, 0.2)
        await asyncio.sleep(self.rng.uniform(0.0, 1.0))
        on_primary = int(await asyncio.to_thread(pair.psql, pair.primary, count, "bridge"))  # a floor
        await asyncio.to_thread(pair.kill_primary)
        await asyncio.to_thread(pair.promote)
        self.rows_lost += on_primary - int(await asyncio.to_thread(pair.psql, pair.standby, count, "bridge"))
        await asyncio.to_thread(pair.rebuild_standby)
