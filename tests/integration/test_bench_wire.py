"""The whole-daemon benchmark (`bench.wire`) cannot silently rot: its fake serve answers like the real
one (docs/upstream.md §3, §14), and a quick run stores exactly the upstream's log with counters that add up."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bench import wire_workload as w
from bench.wire_answers import MAX_NAMED
from bench.wire_serve import WireServe
from bridge.errors import InvalidRequest, UpstreamUnavailable
from bridge.events import parse_frame
from bridge.upstream.client import UpstreamClient
from bridge.upstream.sync_plan import SYNC_CUTOFF_MAX
from tests.support.serving import served
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[tuple[WireServe, str]]:
    fake = WireServe(sessions=3, events=8, burst=2, legacy_every=4)
    async with served(fake.app()) as url:
        yield fake, url


async def test_sync_log_names_and_unnamed_like_the_real_serve(serve: tuple[WireServe, str]) -> None:
    fake, url = serve
    a, b, c = (w.session_id(k) for k in range(3))
    async with UpstreamClient(url) as client:
        _, got = await client.send_json("POST", "/sync/history", {a: 5, b: SYNC_CUTOFF_MAX})  # b: none of its events
        by = {sid: [i["seq"] for i in got if i["aggregate_id"] == sid] for sid in (a, b, c)}
        assert by == {a: [6, 7, 8], b: [], c: list(range(9))}  # c unnamed: whole from seq 0
        assert {i["type"] for i in got if i["seq"] == 4} == {"message.updated.1"}  # legacy, gap-free seqs
        page = await client.history(a, 0)
        assert [e["durable"]["seq"] for e in page.events] == [1, 2, 3, 5, 6, 7]  # v2 only: legacy seqs are gaps
        with pytest.raises(InvalidRequest):
            await client.send_json("POST", "/sync/history", {a: SYNC_CUTOFF_MAX + 1})  # refused like `after`
    assert fake.counters["POST /sync/history"][0] == 2  # the refused one counted too


async def test_sync_log_refuses_a_997th_name_like_the_real_serve(serve: tuple[WireServe, str]) -> None:
    _, url = serve
    names = {w.session_id(k): SYNC_CUTOFF_MAX for k in range(3, 3 + MAX_NAMED)}  # unknown ids are accepted
    async with UpstreamClient(url) as client:
        _, got = await client.send_json("POST", "/sync/history", names)  # 996 named: answered
        assert {i["aggregate_id"] for i in got} == {w.session_id(k) for k in range(3)}  # the unnamed, whole
        names[w.session_id(0)] = 0
        with pytest.raises(UpstreamUnavailable, match="HTTP 500"):  # 997: SQLite's expression depth (§14)
            await client.send_json("POST", "/sync/history", names)


async def test_durable_stream_sends_nothing_before_its_first_event(serve: tuple[WireServe, str]) -> None:
    fake, url = serve
    sid = w.session_id(1)
    async with UpstreamClient(url) as client:
        stream = client.open_session_events(sid, 8)  # at the head: no status line until the burst
        opening = asyncio.create_task(stream.__aenter__())
        # the handler parked waiting for an event without writing anything (it prepares before it writes)
        await wait_until(lambda: len(fake.by_id[sid].waiters) == 1, 10, 0.01)
        assert not opening.done() and fake.open_durable == 1
        await fake.publish_burst()
        body = await opening
        text = ""
        while text.count("\n\n") < 2:
            text += (await body.__anext__()).decode()
        frames = [f.removeprefix("data: ") for f in text.split("\n\n") if f]
        assert [parse_frame(f).seq for f in frames] == [9, 10]  # the burst's two v2 events, nothing else
        await stream.__aexit__(None, None, None)


def test_quick_run_stores_the_upstream_log_and_counts_add_up(database_url: str, tmp_path: Path) -> None:
    out = tmp_path / "wire.json"
    env = {**os.environ, "BRIDGE_DATABASE_URL": database_url}
    run = subprocess.run([sys.executable, "-m", "bench.wire", "--quick", "--json", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    r = json.loads(out.read_text())
    sessions, events, burst = 20, 5, 5
    assert r["check"] == {"equal": True, "sessions_differing": 0, "first_differing": [], "rejects": 0, "gaps": 0,
                          "stored_rows": sessions * (1 + events + burst),
                          "upstream_rows": sessions * (1 + events + burst)}
    c, b = r["catch_up"], r["burst"]
    assert c["events"] == sessions * (1 + events) and b["events"] == sessions * burst
    assert c["calls"]["GET /api/session"] >= 1 and c["calls"]["GET /global/event"] >= 1
    assert c["sync_calls"] >= 1 and c["sync_request_bytes"] > 0  # legacy events are only in the sync log
    assert c["sync_request_bytes_per_event"] == c["sync_request_bytes"] / c["events"]
    assert c["events"] + b["events"] == r["check"]["stored_rows"]
    # every byte of the burst's bus events and twins was sent to the daemon's /global/event reader
    assert b["response_bytes"]["GET /global/event"] >= r["burst_global_bytes"] > 0
    assert r["warm_sessions"] == sessions and r["follower_crashes"] == 0
    assert 0 < r["baselines"]["naive_events_per_s"] < r["baselines"]["copy_events_per_s"]
    assert r["baselines"]["rows"] == sessions * (1 + events + burst) and r["baselines"]["fsync"] == "on"
