"""Sessions that come and go: the whole daemon on the real wire for minutes (numbers for BENCHMARKS.md).

Three processes, like `bench.wire`: an embedded PostgreSQL (fsync on), the fake serve `bench.churn_serve`
(bench.wire_serve's wire: durable streams, `/global/event` with sync twins, `/sync/history` answered like the
real 1.18.33, every session the body does not name whole, docs/upstream.md §14, §15) and the real
`opencode-bridge run` with `BRIDGE_IDLE_TTL_S=20`. Every `--round-s` (10 s) the serve creates `--new` (200)
sessions of `--events` (10) events and appends `--extend` (10) events to `--returning` (200) older sessions
picked at random, most of which the bridge's idle GC has released by then (their twins bring them back).

Measured: events upstream and stored; sync-log calls, the items their answers held and the request bytes,
per stored event; the daemon's RSS every `--sample-s` (/proc) and its least-squares slope per 1,000 sessions
cycled after the first third of the churn; warm sessions over time (/metrics); the daemon's CPU per stored
event; rejects and recorded gaps. After the last round the daemon gets `--drain-s` to store the rest.
Exits 1 unless every session's stored (seq, event_id) list equals the upstream's log, with no reject and no
recorded gap.

Usage: python -m bench.churn [--minutes 10] [--json FILE] [--plot FILE.png] [--label TEXT] | --quick
(BRIDGE_DATABASE_URL: run in that database instead of an embedded PostgreSQL of its own.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg  # type: ignore[import-untyped]

from bench import churn_report as report
from bench import wire_measure as m
from bench.wire_procs import UPSTREAM, Child, measured, processes, serve_url, until
from tests.support.bridge_proc import free_port


class Run:
    """The processes of one run and what is sampled from them."""

    def __init__(self, a: argparse.Namespace, http: aiohttp.ClientSession, con: asyncpg.Connection,
                 fake: str, bridge: str, daemon: Child) -> None:
        self.a, self.http, self.con, self.fake, self.bridge, self.daemon = a, http, con, fake, bridge, daemon
        self.pid = daemon.proc.pid
        self.samples: list[dict[str, Any]] = []
        self.t0 = time.monotonic()
        self.cpu0 = m.cpu_s(self.pid)

    def alive(self) -> None:
        if self.daemon.proc.poll() is not None:
            raise RuntimeError(f"the daemon exited with {self.daemon.proc.returncode}")

    async def sample(self) -> dict[str, Any]:
        self.alive()
        counters = await m.get_json(self.http, self.fake + "/_bench/counters")
        metrics = await m.daemon_metrics(self.http, self.bridge)
        s = {"t": round(time.monotonic() - self.t0, 2), "rss_mib": round(m.rss_mib(self.pid), 1),
             "cpu_s": round(m.cpu_s(self.pid) - self.cpu0, 2), "warm": metrics.get("bridge_sessions_warm", 0.0),
             "cycled": counters["sessions"], "upstream": counters["log_events"],
             "stored": await m.stored_count(self.con, UPSTREAM), "sync_items": counters["sync_items"]}
        self.samples.append(s)
        return s

    async def churn(self) -> float:
        """The rounds, sampling in between; the churn's length in seconds."""
        a = self.a
        rounds = max(1, int(a.minutes * 60 // a.round_s))
        next_round = next_sample = self.t0
        done = 0
        while done < rounds:
            now = time.monotonic()
            if now >= next_round:
                async with self.http.post(self.fake + "/_bench/round") as r:
                    r.raise_for_status()
                done += 1
                next_round += a.round_s
            if time.monotonic() >= next_sample:
                await self.sample()
                next_sample += a.sample_s
            await asyncio.sleep(max(0.0, min(next_round, next_sample) - time.monotonic()))
        return time.monotonic() - self.t0

    async def drain(self) -> tuple[bool, float]:
        """Sample on until the daemon stored what the serve holds; (drained, seconds after the churn)."""
        start = time.monotonic()
        while True:
            s = await self.sample()
            if s["stored"] >= s["upstream"]:
                return True, time.monotonic() - start
            if time.monotonic() - start > self.a.drain_s:
                return False, time.monotonic() - start
            await asyncio.sleep(self.a.sample_s)


def _counts(metrics: dict[str, float], prefix: str) -> dict[str, float]:
    return {k[len(prefix):].strip("{}"): v for k, v in sorted(metrics.items()) if k.startswith(prefix + "{")}


def _results(a: argparse.Namespace, run: Run, churn_s: float, drained: tuple[bool, float],
             counters: dict[str, Any], metrics: dict[str, float]) -> dict[str, Any]:
    last = run.samples[-1]
    stored = max(last["stored"], 1)
    routes = counters["routes"]
    sync = routes.get("POST /sync/history", [0, 0, 0])
    after_first = [s for s in run.samples if s["t"] >= a.round_s]
    return {
        "label": a.label, "minutes": a.minutes, "round_s": a.round_s, "rounds": counters["rounds"],
        "churn_s": churn_s, "idle_ttl_s": a.idle_ttl_s, "legacy_every": a.legacy_every,
        "sessions_cycled": counters["sessions"], "events_per_new_session": a.events,
        "sessions_picked": counters["picked"], "extend_events": a.extend,
        "events_upstream": counters["log_events"], "events_stored": last["stored"],
        "drained": drained[0], "drain_s": drained[1],
        "sync_calls": sync[0], "sync_request_bytes": sync[1], "sync_response_bytes": sync[2],
        "sync_items_answered": counters["sync_items"], "sync_items_per_stored_event": counters["sync_items"] / stored,
        "sync_request_bytes_per_stored_event": sync[1] / stored,
        "request_bytes_per_stored_event": sum(c[1] for c in routes.values()) / stored,
        "response_bytes_per_stored_event": sum(c[2] for c in routes.values()) / stored,
        "calls": {r: c[0] for r, c in sorted(routes.items()) if c[0]},
        "rss_mib": report.spread([s["rss_mib"] for s in run.samples]),
        "rss_slope": report.rss_slope(run.samples, churn_s),
        "warm_sessions": report.spread([s["warm"] for s in after_first]),
        "cpu_s": last["cpu_s"], "cpu_us_per_event": last["cpu_s"] / stored * 1e6,
        "sync_metrics": m.ingest_counters({}, metrics),
        "claims": _counts(metrics, "bridge_lease_claims_total"),
        "releases": _counts(metrics, "bridge_session_releases_total"),
        # what each per-session structure holds at the end (docs/operations.md "Memory for weeks")
        "structures": _counts(metrics, "bridge_session_structures"),
        "follower_crashes": metrics.get("bridge_follower_crashes_total", 0.0),
        "rejects_metric": metrics.get("bridge_rejects_total", 0.0),
        "samples": run.samples,
    }


async def measure(a: argparse.Namespace, work: Path, database_url: str) -> dict[str, Any]:
    load = os.getloadavg()
    serve_argv = ["bench.churn_serve", "--new", str(a.new), "--events", str(a.events), "--returning",
                  str(a.returning), "--extend", str(a.extend), "--legacy-every", str(a.legacy_every), "--seed",
                  str(a.seed)]
    async with processes(work, database_url, serve_argv) as procs:
        async with aiohttp.ClientSession() as http:
            fake = await serve_url(procs.serve, 60)
            port = free_port()
            bridge = f"http://127.0.0.1:{port}"
            daemon = procs.start_daemon(fake, port, None, BRIDGE_IDLE_TTL_S=f"{a.idle_ttl_s:g}")

            async def listening() -> bool:  # the daemon reads /global/event: no round goes unseen
                return bool((await m.get_json(http, fake + "/_bench/counters"))["global_readers"])
            await until("the daemon's /global/event reader", listening, 60)
            run = Run(a, http, procs.con, fake, bridge, daemon)
            churn_s = await run.churn()
            drained = await run.drain()
            counters = await m.get_json(http, fake + "/_bench/counters")
            metrics = await m.daemon_metrics(http, bridge)
            out = _results(a, run, churn_s, drained, counters, metrics)
            expected = await m.get_json(http, fake + "/_bench/expected")
        out["fsync"] = await procs.con.fetchval("SHOW fsync")
        await procs.finish(out, expected)
    out["load_average_start"], out["load_average_end"] = load, os.getloadavg()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="of rounds (then the drain)")
    ap.add_argument("--round-s", type=float, default=10.0)
    ap.add_argument("--new", type=int, default=200, help="sessions created per round")
    ap.add_argument("--events", type=int, default=10, help="events of a new session (seq 0 included)")
    ap.add_argument("--returning", type=int, default=200, help="older sessions extended per round")
    ap.add_argument("--extend", type=int, default=10, help="events appended to each of them")
    ap.add_argument("--legacy-every", type=int, default=4)
    ap.add_argument("--idle-ttl-s", type=float, default=20.0, help="the daemon's BRIDGE_IDLE_TTL_S")
    ap.add_argument("--sample-s", type=float, default=2.0)
    ap.add_argument("--drain-s", type=float, default=300.0, help="after the last round, at most")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="a minute, rounds of 20 + 20 every 5 s, TTL 5 s: a test")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, database)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--plot", help="draw RSS and warm sessions over time into this PNG")
    ap.add_argument("--label", default="", help="names the run in the JSON and the plot")
    a = ap.parse_args()
    if a.quick:
        a.minutes, a.round_s, a.new, a.returning, a.idle_ttl_s, a.sample_s, a.drain_s = 1.0, 5.0, 20, 20, 5.0, 1.0, 60.0
    res, work = measured("bridge-churn-", lambda work, url: measure(a, work, url))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2, default=str) + "\n")
    if a.plot:
        report.plot(res, Path(a.plot))
    print(json.dumps({k: v for k, v in res.items() if k != "samples"}, indent=2, default=str))
    print(report.summary(res))
    ok = res["check"]["equal"] and not res["rejects_metric"]
    if ok and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
