"""The whole daemon on the real wire, in one run and one database (numbers for BENCHMARKS.md).

Three processes: an embedded PostgreSQL (fsync on), the fake serve `bench.wire_serve` (the complete wire
of the captures: durable streams, `/global/event` with bus events and sync twins, `/sync/history` as the
real one answers it, docs/upstream.md §3, §14, §15) and the real `opencode-bridge run`. Measured:
- catch-up: S sessions x N events (plus each one's seq 0) exist upstream before the daemon starts; from
  the daemon's first upstream request until the stored rows equal the upstream's total;
- idle: the daemon's CPU over `--idle-seconds` with every session warm and no traffic (heartbeats only);
- burst: B more events in every session at once (the fake publishes them round by round across all
  sessions), until stored again equals the upstream's total;
- per phase: upstream calls and request/response body bytes per stored event (the fake's counters), the
  daemon's CPU per stored event (/proc/<pid>/stat), follower crashes and errors (/metrics, its log);
- then, the daemon stopped: COPY of exactly the stored rows into a clone of `chat_session_events` and the
  naive mirror (one INSERT + cursor UPDATE + COMMIT per event), bench.write_path's, same database.
Exits 1 unless every session's stored (seq, event_id) list equals the upstream's log, with no reject
and no recorded gap.

Usage: python -m bench.wire [--sessions 1000] [--events 20] [--burst 20] [--json FILE] | --quick
(BRIDGE_DATABASE_URL: run in that database instead of an embedded PostgreSQL of its own.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench import wire_measure as m
from bench.wire_procs import UPSTREAM, measured, processes, serve_url, until
from tests.support.bridge_proc import free_port


def _shares(phase: dict[str, Any]) -> str:
    if "serve_cpu_us_per_event" not in phase:
        return ""
    return (f" (beside it: the serve {phase['serve_cpu_us_per_event']:.0f}, PostgreSQL and the rest "
            f"{phase['rest_cpu_us_per_event']:.0f} us/event; {phase['machine_cores_busy']:.2f} cores busy)")


def _phase(a: argparse.Namespace, what: str, pid: int) -> None:
    """A measured phase begins or ends (`catch_up`, `/catch_up`, `burst`, `/burst`): bench.wire_stages samples it."""
    hook = getattr(a, "phase_hook", None)
    if hook is not None:
        hook(what, pid)


def _profile_phase(a: argparse.Namespace, pid: int) -> None:
    """Under --profile: the daemon writes the phase just ended to its own file (bench.wire_profiled)."""
    if a.profile:
        os.kill(pid, signal.SIGUSR2)


async def warm_idle_burst(a: argparse.Namespace, http: aiohttp.ClientSession, fake: str, bridge: str, pid: int,
                          total: int, done: float, stored_is: Any, *, serve_pid: int) -> dict[str, Any]:
    """After the catch-up: wait for every session to be warm, the idle window, then the burst."""
    res: dict[str, Any] = {}

    # warm: every session followed (or as many as the daemon keeps), then idle
    async def warm_settled() -> bool:
        got: float = (await m.daemon_metrics(http, bridge)).get("bridge_sessions_warm", 0.0)
        return bool(got >= a.sessions)
    with contextlib.suppress(TimeoutError):  # reported below: the warm count is what it is
        await until("warm", warm_settled, 60, 0.5)
    warm_at = time.time()
    cpu0 = m.cpu_s(pid)
    await asyncio.sleep(a.settle_seconds)  # the warm-up's tail (statuses, polls) is not idleness
    metrics = await m.daemon_metrics(http, bridge)
    counters = await m.get_json(http, fake + "/_bench/counters")
    res["warm_sessions"] = metrics.get("bridge_sessions_warm", 0)
    res["open_durable_streams"] = counters["open_durable"]
    res["warm_s_after_catch_up"] = warm_at - done
    res["settle_cpu_percent"] = (m.cpu_s(pid) - cpu0) / a.settle_seconds * 100
    cpu0, t0 = m.cpu_s(pid), time.monotonic()
    await asyncio.sleep(a.idle_seconds)
    idle_cpu = (m.cpu_s(pid) - cpu0) / (time.monotonic() - t0)
    res["idle"] = {"seconds": a.idle_seconds, "cpu_percent_of_a_core": idle_cpu * 100,
                   "cpu_percent_per_1000_warm": idle_cpu * 100 / max(res["warm_sessions"], 1) * 1000}

    # (b) the burst, warm
    _profile_phase(a, pid)  # BASE.1: warm-up's tail, settle and idle
    before = await m.get_json(http, fake + "/_bench/counters")
    metrics_before = await m.daemon_metrics(http, bridge)
    _phase(a, "burst", pid)
    cpu0 = m.cpu_s(pid)
    shares = m.Shares(serve_pid, pid)
    async with http.post(fake + "/_bench/burst") as r:
        started = (await r.json())["started_at"]
    n = a.sessions * a.burst
    with contextlib.suppress(TimeoutError):  # then reported incomplete, as it stands
        await until("burst", lambda: stored_is(total + n), a.timeout)
    done = time.time()
    _phase(a, "/burst", pid)
    _profile_phase(a, pid)  # BASE.2: the burst (BASE.3: what follows, to the stop)
    burst_cpu = m.cpu_s(pid) - cpu0
    after = await m.get_json(http, fake + "/_bench/counters")
    complete = await stored_is(total + n)
    res["burst"] = {"complete": complete, "events": n, "seconds": done - started, "events_per_s": n / (done - started),
                    "published_s": (after["burst_published_at"] or done) - started,
                    "cpu_us_per_event": burst_cpu / n * 1e6, **shares.per_event(n),
                    "ingest": m.ingest_counters(metrics_before, await m.daemon_metrics(http, bridge)),
                    **m.Phase.between(before, after).per_event(n)}
    return res


async def measure(a: argparse.Namespace, work: Path, database_url: str) -> dict[str, Any]:
    out: dict[str, Any] = {"sessions": a.sessions, "events_per_session": a.events, "burst_per_session": a.burst,
                           "legacy_every": a.legacy_every, "load_average_start": os.getloadavg()}
    serve_argv = ["bench.wire_serve", "--sessions", str(a.sessions), "--events", str(a.events), "--burst",
                  str(a.burst), "--legacy-every", str(a.legacy_every)]
    async with processes(work, database_url, serve_argv) as procs:
        con = procs.con
        async with aiohttp.ClientSession() as http:
            fake = await serve_url(procs.serve, 600)
            total = (await m.get_json(http, fake + "/_bench/counters"))["log_events"]
            port = free_port()
            bridge = f"http://127.0.0.1:{port}"
            spawned = time.time()
            daemon = procs.start_daemon(fake, port, a.profile, BRIDGE_WORKERS=str(a.workers))
            pid = daemon.proc.pid

            async def stored_is(n: int) -> bool:
                if daemon.proc.poll() is not None:
                    raise RuntimeError(f"the daemon exited with {daemon.proc.returncode}")
                return await m.stored_count(con, UPSTREAM) >= n

            # (a) catch-up after start; the daemon's CPU from its first upstream request (its start-up and
            # imports before it are not catch-up), sampled at the poll that first sees that request
            cpu_at_first: list[float] = []
            shares_at_first: list[m.Shares] = []

            async def caught_up() -> bool:
                if not cpu_at_first and (await m.get_json(http, fake + "/_bench/counters"))["first_request_at"]:
                    cpu_at_first.append(m.cpu_s(pid))
                    shares_at_first.append(m.Shares(procs.serve.proc.pid, pid))
                    _phase(a, "catch_up", pid)
                return await stored_is(total)
            try:
                done = await until("catch-up", caught_up, a.timeout)
            except TimeoutError:  # reported as it stands (stored so far, calls, crashes); no idle, no burst
                done = time.time()
            _phase(a, "/catch_up", pid)
            _profile_phase(a, pid)  # BASE.0: start-up and catch-up
            stored = await m.stored_count(con, UPSTREAM)
            cpu_catch_up = m.cpu_s(pid)
            after_catch_up = await m.get_json(http, fake + "/_bench/counters")
            catch_up_s = done - after_catch_up["first_request_at"]
            out["catch_up"] = {
                "complete": stored >= total, "events": stored, "upstream_events": total, "seconds": catch_up_s,
                "events_per_s": stored / catch_up_s, "ms_per_session": catch_up_s / a.sessions * 1000,
                "from_spawn_s": done - spawned, "cpu_us_per_event_with_start": cpu_catch_up / max(stored, 1) * 1e6,
                "cpu_us_per_event": (cpu_catch_up - (cpu_at_first or [0.0])[0]) / max(stored, 1) * 1e6,
                **m.Phase.between({"routes": {}}, after_catch_up).per_event(max(stored, 1)),
                **(shares_at_first[0].per_event(stored) if shares_at_first else {})}
            metrics = await m.daemon_metrics(http, bridge)
            out["catch_up"]["follower_crashes"] = metrics.get("bridge_follower_crashes_total", 0.0)
            # Sessions per lease holder (one per worker with BRIDGE_WORKERS > 1): how the claims spread.
            out["catch_up"]["sessions_per_owner"] = sorted((r[0] for r in await con.fetch(
                "select count(*) from chat_sessions where upstream = $1 group by lease_owner", UPSTREAM)),
                reverse=True)
            out["catch_up"]["ingest"] = m.ingest_counters({}, metrics)
            if out["catch_up"]["complete"]:
                out.update(await warm_idle_burst(a, http, fake, bridge, pid, total, done, stored_is,
                                                  serve_pid=procs.serve.proc.pid))
            out["burst_global_bytes"] = (await m.get_json(http, fake + "/_bench/counters"))["burst_global_bytes"]
            metrics = await m.daemon_metrics(http, bridge)
            out["follower_crashes"] = metrics.get("bridge_follower_crashes_total", 0)
            out["rejects_metric"] = metrics.get("bridge_rejects_total", 0)
            expected = await m.get_json(http, fake + "/_bench/expected")
        await procs.finish(out, expected)
    out["baselines"] = await m.baselines(database_url, UPSTREAM, a.naive_seconds)
    copy, naive = out["baselines"]["copy_events_per_s"], out["baselines"]["naive_events_per_s"]
    for phase in [p for p in ("catch_up", "burst") if p in out]:
        out[phase]["over_copy"] = out[phase]["events_per_s"] / copy
        out[phase]["over_naive"] = out[phase]["events_per_s"] / naive
    out["load_average_end"] = os.getloadavg()
    return out


def summary(r: dict[str, Any]) -> str:
    c = r["catch_up"]
    lines = [
        f"{r['sessions']} sessions x {r['events_per_session']} events (+ seq 0), burst {r['burst_per_session']} each",
        f"catch-up{'' if c['complete'] else ' INCOMPLETE'}: {c['events']} ev in {c['seconds']:.2f} s = "
        f"{c['events_per_s']:.0f} ev/s, {c['over_copy']:.3f}x COPY, {c['over_naive']:.1f}x naive, "
        f"{c['ms_per_session']:.2f} ms/session, CPU {c['cpu_us_per_event']:.1f} us/event"
        f"{_shares(c)}",
        f"  sync-log calls {c['sync_calls']} ({c['sync_request_bytes'] / 1e6:.1f} MB sent), "
        f"{c['sync_request_bytes_per_event']:.0f} B/event; other calls {c['other_calls']}: {c['calls']}",
        f"  ingest: {c['ingest']}"]
    if "burst" in r:
        b, i = r["burst"], r["idle"]
        lines += [
            f"burst{'' if b['complete'] else ' INCOMPLETE'}: {b['events']} ev in {b['seconds']:.2f} s = "
            f"{b['events_per_s']:.0f} ev/s, {b['over_copy']:.3f}x COPY, {b['over_naive']:.1f}x naive, "
            f"CPU {b['cpu_us_per_event']:.1f} us/event{_shares(b)}",
            f"  sync-log calls {b['sync_calls']}, {b['sync_request_bytes_per_event']:.0f} B/event; "
            f"other {b['other_calls']}: {b['calls']}",
            f"  ingest: {b['ingest']}",
            f"idle: {i['cpu_percent_of_a_core']:.2f} % of a core (settling before: {r['settle_cpu_percent']:.1f} %) "
            f"with {r['warm_sessions']:.0f} warm = {i['cpu_percent_per_1000_warm']:.2f} % per 1,000"]
    return "\n".join([*lines,
        f"COPY {r['baselines']['copy_events_per_s']:.0f} ev/s, naive {r['baselines']['naive_events_per_s']:.0f} ev/s; "
        f"crashes {r['follower_crashes']:.0f}, log {r['daemon_log_problems']}; check {r['check']}"])


def workload_args(ap: argparse.ArgumentParser, workers_help: str) -> None:
    """The workload's and the run's options, shared with the tools that run this measurement (bench.wire_stages)."""
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=20)
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--legacy-every", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=900.0, help="per phase")
    ap.add_argument("--workers", type=int, default=1, help=workers_help)
    ap.add_argument("--quick", action="store_true", help="20 sessions x 5 events, short idle and naive: a test")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, database)")
    ap.add_argument("--json", help="also write the results here")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    workload_args(ap, "BRIDGE_WORKERS of the daemon (CPU: all its processes)")
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--settle-seconds", type=float, default=10.0, help="after warm-up, before the idle window")
    ap.add_argument("--naive-seconds", type=float, default=8.0)
    ap.add_argument("--profile", help="run the daemon under cProfile: BASE.0 catch-up, .1 idle, .2 burst, .3 stop")
    a = ap.parse_args()
    if a.quick:
        a.sessions, a.events, a.burst, a.timeout = 20, 5, 5, 60.0
        a.idle_seconds, a.settle_seconds, a.naive_seconds = 1.0, 0.5, 0.5
    res, work = measured("bridge-wire-", lambda work, url: measure(a, work, url))
    res["machine"] += (f", PostgreSQL {res['baselines']['postgres']}, fsync {res['baselines']['fsync']}")
    print(json.dumps(res, indent=2, default=str))
    print(summary(res))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2, default=str) + "\n")
    if res["check"]["equal"] and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if res["check"]["equal"] and res["catch_up"]["complete"] and res.get("burst", {}).get("complete") else 1)


if __name__ == "__main__":
    main()
