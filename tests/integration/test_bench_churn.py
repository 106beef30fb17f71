"""The churn benchmark (`bench.churn`) cannot silently rot: its fake serve's rounds create sessions and extend
older ones on the live wire (docs/upstream.md §14, §15), and a quick run stores exactly the upstream's log
and reports every figure BENCHMARKS.md takes from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest_asyncio
from aiohttp import ClientSession

from bench import wire_workload as w
from bench.churn_serve import ChurnServe
from tests.support.serving import served

ROOT = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[tuple[ChurnServe, str]]:
    fake = ChurnServe(new=3, events=4, returning=2, extend=3, legacy_every=2, seed=7)
    async with served(fake.app()) as url:
        yield fake, url


async def _rounds_seen_live(http: ClientSession, url: str, rounds: int) -> list[tuple[str, int, str]]:
    """Run `rounds` rounds while reading /global/event: every sync twin's (session, seq, type), in order."""
    got: list[tuple[str, int, str]] = []
    async with http.get(url + "/global/event") as live:
        assert b'"server.connected"' in await live.content.readline()
        published = 0
        for _ in range(rounds):
            async with http.post(url + "/_bench/round") as r:
                published += (await r.json())["events"]
        while len(got) < published:  # everything published after the reader connected is queued for it
            line = await live.content.readline()
            if line.startswith(b"data: ") and b'"type":"sync"' in line:
                twin = orjson.loads(line[6:])["payload"]["syncEvent"]
                got.append((twin["aggregateID"], twin["seq"], twin["type"]))
    return got


async def test_rounds_create_sessions_and_extend_older_ones_live(serve: tuple[ChurnServe, str]) -> None:
    fake, url = serve
    async with ClientSession() as http:
        twins = await _rounds_seen_live(http, url, 2)
        first, second = twins[:12], twins[12:]
        new1, new2 = [w.session_id(k) for k in range(3)], [w.session_id(k) for k in range(3, 6)]
        # round 1: three new sessions, step by step across them, from their `session.created.1` at seq 0
        assert [(sid, seq) for sid, seq, _ in first] == [(sid, seq) for seq in range(4) for sid in new1]
        assert {t for _, seq, t in first if seq == 0} == {"session.created.1"}
        # round 2: three more, and three events appended to two sessions of round 1 (after their seq 3)
        assert sorted((sid, seq) for sid, seq, _ in second if sid in new2) == sorted(
            (sid, seq) for sid in new2 for seq in range(4))
        picked = {sid for sid, _, _ in second if sid in new1}
        assert len(picked) == 2 and fake.picked == 2
        assert sorted((sid, seq) for sid, seq, _ in second if sid in picked) == sorted(
            (sid, seq) for sid in picked for seq in (4, 5, 6))
        async with http.get(url + "/api/session") as r:  # every session, newest first
            assert [s["id"] for s in (await r.json())["data"]] == [*reversed(new2), *reversed(new1)]
        async with http.post(url + "/sync/history", json={new1[0]: 2}) as r:  # the others whole (§14)
            items = await r.json()
        assert len(items) == len(twins) - 3 and fake.sync_items == len(items)
        async with http.get(url + "/_bench/counters") as r:
            c = await r.json()
        assert (c["rounds"], c["sessions"], c["picked"], c["log_events"], c["sync_items"]) == (2, 6, 2, 30, 27)


def test_quick_run_stores_the_upstream_log_and_reports_its_figures(database_url: str, tmp_path: Path) -> None:
    out, png = tmp_path / "churn.json", tmp_path / "churn.png"
    env = {**os.environ, "BRIDGE_DATABASE_URL": database_url}
    run = subprocess.run([sys.executable, "-m", "bench.churn", "--quick", "--json", str(out), "--plot", str(png)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    r = json.loads(out.read_text())
    rounds, new, events, returning, extend = 12, 20, 10, 20, 10  # --quick: a minute of rounds every 5 s
    upstream = rounds * new * events + (rounds - 1) * returning * extend
    assert r["check"] == {"equal": True, "sessions_differing": 0, "first_differing": [], "rejects": 0, "gaps": 0,
                          "stored_rows": upstream, "upstream_rows": upstream}
    assert (r["rounds"], r["sessions_cycled"], r["sessions_picked"]) == (rounds, rounds * new, (rounds - 1) * returning)
    assert r["events_upstream"] == r["events_stored"] == upstream and r["drained"]
    assert r["rejects_metric"] == 0 and r["follower_crashes"] == 0 and r["fsync"] == "on"
    assert r["releases"].get("reason=idle", 0) > 0  # the idle GC released sessions, and twins brought some back
    assert r["claims"]["reason=live_event"] > rounds * new
    # the sync-log figures add up (none may be asked at all: twins and durable streams can carry every session)
    calls = r["sync_metrics"].get("bridge_sync_calls_total", 0)  # the daemon's count
    assert r["calls"].get("POST /sync/history", 0) == r["sync_calls"] == calls
    assert r["sync_items_per_stored_event"] == r["sync_items_answered"] / upstream
    assert r["sync_request_bytes_per_stored_event"] == r["sync_request_bytes"] / upstream
    assert r["request_bytes_per_stored_event"] >= r["sync_request_bytes_per_stored_event"]
    assert r["response_bytes_per_stored_event"] > 0  # the durable streams' bytes at least
    # RSS and warm sessions sampled over the whole run, the slope fitted on the last two thirds
    samples = r["samples"]
    assert len(samples) >= 20 and all(s["rss_mib"] > 0 for s in samples)
    assert samples[-1]["stored"] == upstream and samples[-1]["cycled"] == rounds * new
    assert r["rss_slope"]["mib_per_1000_sessions"] is not None and r["rss_slope"]["samples"] >= 10
    assert r["rss_mib"]["max"] >= r["rss_mib"]["end"] > 0 and r["warm_sessions"]["max"] >= new
    assert r["cpu_us_per_event"] > 0 and r["cpu_s"] > 0
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
