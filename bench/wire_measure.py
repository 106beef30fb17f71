"""What `bench.wire` reads from the processes it runs: a process's CPU from /proc, the daemon's /metrics
and log, the fake serve's counters, the stored rows against the upstream's log, and the baselines (COPY
and the naive mirror, bench.write_path's, on the very rows the daemon stored)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg  # type: ignore[import-untyped]
from prometheus_client.parser import text_string_to_metric_families

from bench.write_path_baselines import COLUMNS, copy_ceiling, naive_mirror

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` and its live children so far (/proc/<pid>/stat fields 14 and
    15): a daemon's workers with BRIDGE_WORKERS > 1."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return (int(fields[11]) + int(fields[12])) / TICKS + sum(cpu_s(int(c)) for c in children)


def machine_busy_s() -> float:
    """Every core's non-idle CPU seconds so far (/proc/stat: user, nice, system, irq, softirq, steal)."""
    f = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return sum(int(f[i]) for i in (1, 2, 3, 6, 7, 8)) / TICKS


class Shares:
    """The CPU a phase took beside the daemon's: the serve's and the rest of the machine's (PostgreSQL, and
    whatever else runs: on a quiet machine, mostly PostgreSQL), per event, and the cores busy."""

    def __init__(self, serve_pid: int, daemon_pid: int) -> None:
        self.serve_pid, self.daemon_pid = serve_pid, daemon_pid
        self.at = (time.monotonic(), machine_busy_s(), cpu_s(serve_pid), cpu_s(daemon_pid))

    def per_event(self, events: int) -> dict[str, float]:
        t, machine, serve, daemon = time.monotonic(), machine_busy_s(), cpu_s(self.serve_pid), cpu_s(self.daemon_pid)
        d_machine, d_serve, d_daemon = machine - self.at[1], serve - self.at[2], daemon - self.at[3]
        n = max(events, 1)
        return {"serve_cpu_us_per_event": d_serve / n * 1e6,
                "rest_cpu_us_per_event": max(d_machine - d_serve - d_daemon, 0.0) / n * 1e6,
                "machine_cores_busy": d_machine / max(t - self.at[0], 1e-9)}


def rss_mib(pid: int) -> float:
    """Resident set size of process `pid` now, in MiB (/proc/<pid>/status `VmRSS`)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for pid {pid}")


async def get_json(http: aiohttp.ClientSession, url: str) -> Any:
    async with http.get(url) as r:
        r.raise_for_status()
        return await r.json(content_type=None)


async def daemon_metrics(http: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """The daemon's /metrics, each sample's value by `name{labels}` (counters and gauges summed per name too)."""
    async with http.get(url + "/metrics") as r:
        text = await r.text()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
            if labels:
                out[s.name] = out.get(s.name, 0.0) + s.value
    return out


INGEST_COUNTERS = ("bridge_sync_repairs_total{", "bridge_twin_events_total", "bridge_events_duplicate_total",
                   "bridge_twin_holds_total{", "bridge_sync_calls_total", "bridge_upstream_reconnects_total{",
                   "bridge_durable_stall_holds_total{", "bridge_live_frames_skipped_total{",
                   "bridge_live_frames_peeked_total{")


def ingest_counters(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """How the daemon's ingest went over a phase: sync-log repairs by cause, twins stored directly,
    benign duplicates (from two /metrics readings)."""
    return {k: v - before.get(k, 0.0) for k, v in sorted(after.items())
            if k.startswith(INGEST_COUNTERS) and v != before.get(k, 0.0)}


def log_problems(path: Path) -> dict[str, int]:
    """warning, error and critical lines of the daemon's JSON log, counted by `level:event`."""
    counts: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("{") or '"level": "info"' in line or '"level": "debug"' in line:
            continue  # not a log record (the local-mode banner) or not a problem
        try:
            rec = json.loads(line)
            key = f"{rec.get('level', '?')}:{rec.get('event', '?')}"
        except ValueError:
            key = f"unparsed:{line[:60]}"
        counts[key] = counts.get(key, 0) + 1
    return counts


@dataclass
class Phase:
    """The fake serve's counters over one phase: per route, calls and request/response body bytes."""
    routes: dict[str, list[int]]

    @staticmethod
    def between(before: dict[str, Any], after: dict[str, Any]) -> Phase:
        b, a = before["routes"], after["routes"]
        return Phase({r: [v - (b.get(r) or [0, 0, 0])[i] for i, v in enumerate(c)] for r, c in a.items()
                      if c != b.get(r)})

    def per_event(self, events: int) -> dict[str, Any]:
        sync = self.routes.get("POST /sync/history", [0, 0, 0])
        others = {r: c[0] for r, c in self.routes.items() if r != "POST /sync/history" and c[0]}
        return {
            "calls": {r: c[0] for r, c in sorted(self.routes.items()) if c[0]},
            "request_bytes": {r: c[1] for r, c in sorted(self.routes.items()) if c[1]},
            "response_bytes": {r: c[2] for r, c in sorted(self.routes.items())},
            "sync_calls": sync[0],
            "sync_request_bytes": sync[1],
            "sync_calls_per_event": sync[0] / events,
            "sync_request_bytes_per_event": sync[1] / events,
            "sync_response_bytes_per_event": sync[2] / events,
            "other_calls": sum(others.values()),
            "other_calls_per_event": sum(others.values()) / events,
            "response_bytes_per_event": sum(c[2] for c in self.routes.values()) / events,
        }


def _raw(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def stored_count(con: asyncpg.Connection, upstream: str) -> int:
    n: int = await con.fetchval("SELECT count(*) FROM chat_session_events WHERE upstream = $1", upstream)
    return n


async def check_stored(url: str, upstream: str, expected: dict[str, list[list[Any]]]) -> dict[str, Any]:
    """Stored (seq, event_id) of every session against the upstream's log; rejects and recorded gaps."""
    con = await asyncpg.connect(_raw(url))
    try:
        rows = await con.fetch("SELECT session_id, seq, event_id FROM chat_session_events WHERE upstream = $1 "
                               "ORDER BY session_id, seq", upstream)
        rejects = await con.fetchval("SELECT count(*) FROM chat_event_rejects WHERE upstream = $1", upstream)
        gaps = await con.fetchval("SELECT count(*) FROM chat_session_gaps WHERE upstream = $1", upstream)
    finally:
        await con.close()
    stored: dict[str, list[list[Any]]] = {}
    for r in rows:
        stored.setdefault(r["session_id"], []).append([r["seq"], r["event_id"]])
    wrong = sorted(sid for sid in expected.keys() | stored.keys() if stored.get(sid) != expected.get(sid))
    return {"equal": not wrong and not rejects and not gaps, "sessions_differing": len(wrong),
            "first_differing": wrong[:3], "stored_rows": len(rows), "rejects": rejects, "gaps": gaps,
            "upstream_rows": sum(len(v) for v in expected.values())}


async def baselines(url: str, upstream: str, naive_s: float) -> dict[str, Any]:
    """COPY (median of three) and the naive mirror, on exactly the rows the daemon stored."""
    con = await asyncpg.connect(_raw(url))
    try:
        cols = ", ".join("payload::text" if c == "payload" else c for c in COLUMNS)
        rows = [tuple(r) for r in await con.fetch(
            f"SELECT {cols} FROM chat_session_events WHERE upstream = $1 ORDER BY session_id, seq", upstream)]
        version = await con.fetchval("SHOW server_version")
        fsync = await con.fetchval("SHOW fsync")
    finally:
        await con.close()
    copy_rate, runs = await copy_ceiling(url, rows)
    naive_rate = await naive_mirror(url, rows, naive_s)
    return {"copy_events_per_s": copy_rate, "copy_runs": runs, "naive_events_per_s": naive_rate,
            "rows": len(rows), "postgres": version, "fsync": fsync}
