"""The health task feeds the watchdog only when the loop, the database and the supervisor are fine."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.ops.health import HealthMonitor, HealthTimes, HealthVerdict, judge
from bridge.ops.sdnotify import Notifier
from tests.support.waiting import wait_until


def test_judge_names_every_reason() -> None:
    assert judge(0.01, 0.5, None, True) == HealthVerdict(True, 0.01, ())
    bad = judge(2.0, 0.5, "OperationalError: gone", False)
    assert not bad.healthy
    assert [r.split(" ")[0] for r in bad.reasons] == ["event", "database:", "followers'"]


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[tuple[Notifier, socket.socket]]:
    path = str(tmp_path / "n.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    yield Notifier(path), sock
    sock.close()


def drain(sock: socket.socket) -> list[str]:
    out: list[str] = []
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except BlockingIOError:
            return out


async def _ok() -> None:
    return None


async def test_watchdog_is_withheld_while_the_event_loop_is_blocked(
    notify: tuple[Notifier, socket.socket],
) -> None:
    notifier, sock = notify
    verdicts: list[HealthVerdict] = []
    monitor = HealthMonitor(notifier, database_probe=_ok, supervisor_alive=lambda: True,
                            status_line=lambda: "following 0 sessions",
                            times=HealthTimes(interval_s=0.05, max_loop_lag_s=0.25),
                            on_verdict=verdicts.append)
    task = asyncio.create_task(monitor.run())
    try:
        await wait_until(lambda: "WATCHDOG=1" in drain(sock), 10, 0.02, message="first WATCHDOG=1")
        seen = len(verdicts)
        time.sleep(0.6)  # noqa: ASYNC251 - the point of the test: block the event loop itself
        await wait_until(lambda: len(verdicts) > seen, 10, 0.01, message="a tick after the block")
        after_block = verdicts[seen]
        sent = drain(sock)
        assert not after_block.healthy and after_block.loop_lag_s >= 0.5
        assert "WATCHDOG=1" not in sent
        assert any(m.startswith("STATUS=unhealthy: event loop blocked") for m in sent)
        # It recovers once the loop runs freely again.
        await wait_until(lambda: "WATCHDOG=1" in drain(sock), 10, 0.02, message="WATCHDOG=1 again")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_watchdog_is_withheld_when_the_database_does_not_answer_or_the_supervisor_died(
    notify: tuple[Notifier, socket.socket],
) -> None:
    notifier, sock = notify
    alive = True
    db_up = True

    async def probe() -> None:
        if not db_up:
            await asyncio.Event().wait()  # hangs like a dead TCP peer: the probe timeout must catch it

    monitor = HealthMonitor(notifier, database_probe=probe, supervisor_alive=lambda: alive,
                            status_line=lambda: "ok",
                            times=HealthTimes(interval_s=0.01, max_loop_lag_s=5, probe_timeout_s=0.05))
    assert (await monitor.tick()).healthy
    assert drain(sock) == ["WATCHDOG=1", "STATUS=ok"]
    db_up = False
    v = await monitor.tick()
    assert not v.healthy and v.reasons[0].startswith("database: no answer")
    assert "WATCHDOG=1" not in drain(sock)
    db_up, alive = True, False
    v = await monitor.tick()
    assert v.reasons == ("followers' supervisor is not running",)
    assert drain(sock) == ["STATUS=unhealthy: followers' supervisor is not running"]
    alive = True
    assert (await monitor.tick()).healthy
    assert (await monitor.tick()).healthy
    assert drain(sock) == ["WATCHDOG=1", "STATUS=ok", "WATCHDOG=1"]  # STATUS= only when it changes


def test_status_summary_names_sessions_clients_and_the_recent_commit_lag() -> None:
    from prometheus_client import CollectorRegistry, Gauge, Histogram

    from bridge.ops.status_summary import StatusSummary

    reg = CollectorRegistry()
    lag = Histogram("bridge_upstream_to_commit_seconds", "x", registry=reg)
    Gauge("bridge_ws_connections", "x", registry=reg).set(3)
    lag.observe(10.0)  # before the summary existed: not counted
    summary = StatusSummary(lambda: 2, reg)
    assert summary() == "following 2 sessions, 3 clients, commit lag idle"
    lag.observe(0.010)
    lag.observe(0.030)
    assert summary() == "following 2 sessions, 3 clients, commit lag 20 ms"
