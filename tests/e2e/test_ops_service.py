"""The bridge as a service: sd_notify to a fake NOTIFY_SOCKET, SIGTERM mid-turn, readiness on database
loss, metrics. The bridge runs as a real child process."""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import admin_sql, run_sync
from tests.e2e.test_mirror import UPSTREAM, wait_mirrored
from tests.support.bridge_proc import BridgeProcess
from tests.support.fake_upstream import FakeUpstream
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

STOP_BUDGET_S = 15.0  # well under TimeoutStopSec=30 of deploy/opencode-bridge.service




@pytest.fixture
def notify_socket() -> Iterator[tuple[str, socket.socket]]:
    # Short path: a unix socket path is limited to 107 bytes.
    d = tempfile.mkdtemp(prefix="bn-")
    path = f"{d}/notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    try:
        yield path, sock
    finally:
        sock.close()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def bridges(request: pytest.FixtureRequest) -> Iterator[list[BridgeProcess]]:
    made: list[BridgeProcess] = []
    yield made
    for b in made:
        b.stop()
    if any(getattr(r, "failed", False) for r in [getattr(request.node, "rep_call", None)]):
        for b in made:
            print(f"\n--- tail of {b.log_path} ---\n{b.log_tail(80)}")


class Datagrams:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.got: list[tuple[float, str]] = []

    def drain(self) -> list[str]:
        while True:
            try:
                self.got.append((time.monotonic(), self.sock.recv(4096).decode()))
            except BlockingIOError:
                return [m for _, m in self.got]

    def first_fields(self) -> list[str]:
        return [m.split("\n")[0] for m in self.drain()]


async def get_text(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as r:
        return r.status, await r.text()


def metric(body: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith(name) and not line.startswith("#"))


async def test_sigterm_mid_turn_sends_ready_watchdog_stopping_in_order_exits_0_and_loses_nothing(
    tmp_path: Path, opencode: OpencodeServe, mock_llm: MockLLM, database_url: str, db: AsyncEngine,
    notify_socket: tuple[str, socket.socket], bridges: list[BridgeProcess],
) -> None:
    path, sock = notify_socket
    dgrams = Datagrams(sock)
    env = {"BRIDGE_UPSTREAM_NAME": UPSTREAM, "NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"}
    bridge = BridgeProcess(tmp_path, opencode.base_url, database_url, name="b1", extra_env=env)
    bridges.append(bridge)
    bridge.start()
    await wait_until(lambda: "READY=1" in dgrams.first_fields(), 30, 0.05, message="READY=1")
    # READY=1: database, migrations and HTTP port; /readyz additionally waits for the upstream streams.
    await bridge.wait_ready()
    await wait_until(lambda: "WATCHDOG=1" in dgrams.first_fields(), 10, 0.05, message="WATCHDOG=1")

    sid = await opencode.create_session()
    await opencode.prompt(sid, "MOCK:gate:term1:2 Start talking")
    await mock_llm.wait_gate_reached("term1", timeout=30)

    async def text_started() -> bool:
        dgrams.drain()
        async with db.connect() as c:
            return bool((await c.execute(text("select count(*) from chat_session_events where session_id = :s "
                                              "and kind = 'text:start'"), {"s": sid})).scalar_one())

    await wait_until(text_started, 30, 0.1, message=f"text.started stored in {sid}")
    t0 = time.monotonic()
    assert bridge.proc is not None
    bridge.proc.send_signal(signal.SIGTERM)
    rc = await asyncio.to_thread(bridge.wait, STOP_BUDGET_S)
    took = time.monotonic() - t0
    assert rc == 0, bridge.log_tail()
    assert took < STOP_BUDGET_S
    print(f"\nSIGTERM mid-turn → exit 0 in {took * 1000:.0f} ms")

    fields = dgrams.first_fields()
    assert fields[0] == "READY=1"
    assert fields[-1] == "STOPPING=1"
    assert fields.index("WATCHDOG=1") > 0
    assert "WATCHDOG=1" not in fields[fields.index("STOPPING=1"):]
    assert any(m.startswith("STATUS=following") for m in fields)
    async with db.connect() as c:
        held = (await c.execute(text("select count(*) from chat_sessions where lease_owner is not null and "
                                     "(lease_expires_at is null or lease_expires_at > now())"))).scalar_one()
    assert held == 0  # leases were given back (released, or expired at once for a peer to adopt)

    mock_llm.release("term1")
    await opencode.wait_idle(sid, 60)
    again = BridgeProcess(tmp_path, opencode.base_url, database_url, name="b2",
                          extra_env={"BRIDGE_UPSTREAM_NAME": UPSTREAM})
    bridges.append(again)
    again.start()
    await again.wait_ready()
    await wait_mirrored(db, opencode, sid)




async def test_metrics_are_exposed_and_move_with_ingested_events(
    tmp_path: Path, fake: FakeUpstream, database_url: str, bridges: list[BridgeProcess]
) -> None:
    bridge = BridgeProcess(tmp_path, fake.url, database_url, extra_env={"BRIDGE_UPSTREAM_NAME": UPSTREAM})
    bridges.append(bridge)
    fake.add_session("ses_metrics")
    bridge.start()
    await bridge.wait_ready()
    status, body = await get_text(bridge.url + "/metrics")
    assert status == 200
    for name in ("bridge_events_ingested_total", "bridge_commit_duration_seconds", "bridge_write_batch_events",
                 "bridge_upstream_to_commit_seconds", "bridge_event_loop_lag_seconds", "bridge_sessions_warm",
                 "bridge_upstream_reconnects_total", "bridge_lease_losses_total"):
        assert f"# TYPE {name}" in body or f"# HELP {name}" in body, name
    assert "ses_metrics" not in body  # no session ids in labels
    before = metric(body, "bridge_events_ingested_total")
    for i in range(3):
        await fake.append("ses_metrics", "session.next.prompt.admitted",
                          {"messageID": f"msg_{i}", "prompt": {"text": "hi"}, "delivery": "steer"})

    async def moved() -> bool:
        _, b = await get_text(bridge.url + "/metrics")
        return metric(b, "bridge_events_ingested_total") >= before + 3 and \
            metric(b, "bridge_commit_duration_seconds_count") > 0

    await wait_until(moved, 30, 0.1, message="ingest counters moved")


async def test_readiness_flips_on_database_loss_and_recovers(
    tmp_path: Path, fake: FakeUpstream, database_url: str, pg_server_url: str, bridges: list[BridgeProcess]
) -> None:
    bridge = BridgeProcess(tmp_path, fake.url, database_url, extra_env={"BRIDGE_UPSTREAM_NAME": UPSTREAM})
    bridges.append(bridge)
    bridge.start()
    await bridge.wait_ready()
    name = urlsplit(database_url).path.lstrip("/")

    def refuse(allow: bool) -> None:
        stmts = [f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS {str(allow).lower()}']
        if not allow:
            stmts.append(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
        run_sync(admin_sql(pg_server_url, *stmts))

    async def ready_status() -> int:
        return (await get_text(bridge.url + "/readyz?verbose"))[0]

    await asyncio.to_thread(refuse, False)
    try:
        await wait_until(lambda: _is(ready_status, 503), 30, 0.1, message="/readyz 503 without the database")
        status, _ = await get_text(bridge.url + "/livez")
        assert status == 200  # liveness has no dependency checks
        _, body = await get_text(bridge.url + "/readyz")
        assert '"database"' in body and '"ok": false' in body
    finally:
        await asyncio.to_thread(refuse, True)
    await wait_until(lambda: _is(ready_status, 200), 30, 0.1, message="/readyz 200 after recovery")
    assert bridge.proc is not None and bridge.proc.poll() is None


async def _is(probe: Callable[[], object], want: int) -> bool:
    got = probe()
    assert asyncio.iscoroutine(got)
    return bool(await got == want)
