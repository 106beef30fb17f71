"""Subscribe storm: N WebSocket clients subscribing at once to S sessions (docs/websocket.md §3, §5).

`python -m bench.storm --clients 10000 --sessions 1000` runs, in one run and database (embedded PostgreSQL,
fsync on, unless BRIDGE_DATABASE_URL is set): S sessions with `--stored` events each; the fan-out in its
own process (bench.storm_server: the daemon's read pool of 4, 2 s acquire timeout); then a storm at 1,000
clients and one at `--clients`, each from `--procs` client processes (bench.storm_clients). Clients connect
first; then all subscribe at once, while this process writes one live event to every session each
`--interval` s (stamped with its write time) until every client has caught up, then `--steady` rounds more.
Per storm: clients complete (every seq 1..last, in order, none twice), refused, events delivered vs
expected, subscribe → caught_up and live delivery latency (write → receipt) p50/p99, shared reads. And the
replay of one 20,000-event session: through the shared page reads (store + frames, as write_path's) and
through the socket to one client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.in_database import run_in_database
from bench.storm_deploy import LiveRounds, ServerProcess, deploy_figures, redeploy
from bench.storm_server import SECRET, UPSTREAM
from bench.write_path_phases import replay
from bridge.auth import mint_token
from bridge.events import ChatEvent, normalize, parse_envelope
from bridge.fanout.read_queue import ReadQueue
from bridge.fanout.shared_reads import SharedReads
from bridge.log import configure_logging
from bridge.store.db import make_engine, upgrade_to_head
from bridge.store.reads import FanoutStore
from bridge.store.writes.event_store import EventStore

PREFIX = "ses_storm"
LONG = "ses_stormlong"


def event(sid: str, seq: int, written: float | None = None) -> ChatEvent:
    data: dict[str, Any] = {"timestamp": 1_796_000_000_000 + seq, "sessionID": sid, "assistantMessageID": "msg_b",
                            "textID": "text-0", "text": f"event {seq} of {sid}: " + "x" * 200}
    if written is not None:
        data["t_w"] = written
    return normalize(parse_envelope({"id": f"evt_{sid}_{seq:08d}", "type": "session.next.text.ended", "data": data,
                                     "durable": {"aggregateID": sid, "seq": seq, "version": 1}}))


class Writer:
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.epochs: dict[str, int] = {}
        self.top: dict[str, int] = {}

    async def write(self, sid: str, events: list[ChatEvent]) -> None:
        if sid not in self.epochs:
            self.epochs[sid] = (await self.store.claim(sid, "storm-bench"))[0]
        await self.store.write_batch(sid, self.epochs[sid], events, datetime.now(UTC))
        self.top[sid] = events[-1].envelope.seq or 0

    async def round(self, sids: list[str], width: int = 8) -> None:
        """One live event to every session, `width` writes at a time, each stamped just before its write."""
        async def one(sid: str) -> None:
            await self.write(sid, [event(sid, self.top[sid] + 1, time.time() * 1000)])

        for i in range(0, len(sids), width):
            await asyncio.gather(*(one(s) for s in sids[i:i + width]))


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return round(v[min(len(v) - 1, int(len(v) * q))], 1)


def _metric(url: str, name: str, labels: str = "") -> float:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
    key = f"{name}{{{labels}}}" if labels else name
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(key + " "))


def _counters(url: str) -> dict[str, float]:
    """The fan-out's counters the storm reports (every frame written and the socket writes they took)."""
    return {"frames_sent": _metric(url, "bridge_ws_frames_sent_total"),
            "socket_writes": _metric(url, "bridge_ws_socket_writes_total"),
            "page_reads": _metric(url, "bridge_ws_shared_reads_total", 'read="page"'),
            "page_read_hits": _metric(url, "bridge_ws_shared_read_hits_total", 'read="page"')}


def _machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of every core so far (/proc/stat): how busy the whole machine was between two reads."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return float(sum(fields) - idle), float(sum(fields))


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its live children so far (Linux /proc): the server's
    workers with `--workers`."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") + sum(_cpu_s(int(c)) for c in children)


async def _clients(url: str, sids: list[str], clients: int, procs: int, reconnect: bool) -> list[Any]:
    per = -(-clients // procs)
    return list(await asyncio.gather(*(asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.storm_clients", "--url", url, "--first", str(i * per),
        "--count", str(min(per, clients - i * per)), "--sessions", str(len(sids)), "--prefix", PREFIX,
        "--deadline", "300", *(["--reconnect"] if reconnect else []),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 30)
        for i in range(procs) if i * per < clients)))


async def _tell(ps: list[Any], line: str) -> None:
    for p in ps:
        p.stdin.write(line.encode() + b"\n")
        await p.stdin.drain()


async def _hear(ps: list[Any], word: str) -> list[str]:
    lines = [(await p.stdout.readline()).decode() for p in ps]
    assert all(x.split(" ", 1)[0].strip() == word for x in lines), (word, lines)
    return lines


async def storm(server: ServerProcess, writer: Writer, sids: list[str], clients: int, a: argparse.Namespace) -> dict[
        str, Any]:
    url = server.url
    cpu0 = _cpu_s(server.pid)
    pre = _counters(url)
    ps = await _clients(url, sids, clients, a.procs, a.deploy)
    connect_s = max(float(line.split()[1]) for line in await _hear(ps, "connected"))
    cpu_connect = _cpu_s(server.pid) - cpu0
    live = LiveRounds(lambda: writer.round(sids), a.interval)
    start = time.time()
    busy0 = _machine_busy()
    await _tell(ps, "go")
    live.start()
    await _hear(ps, "caught")
    all_caught = time.time()
    busy1 = _machine_busy()
    # Cores in use on the whole machine from `go` to the last caught_up (fan-out, clients, PostgreSQL, the rest).
    machine_cores = (busy1[0] - busy0[0]) / max(1.0, busy1[1] - busy0[1]) * (os.cpu_count() or 1)
    clients_cpu_s = sum(_cpu_s(p.pid) for p in ps)
    cpu_caught = _cpu_s(server.pid) - cpu0
    out: dict[str, Any] = {}
    if a.deploy:
        # The old process's counters so far carried over (the new one's start at 0); its CPU in full, shutdown
        # included (its last line), less what it had spent before this storm.
        pre = {k: pre[k] - v for k, v in _counters(url).items()}
        spent0 = server.spent_cpu_s
        restart = await redeploy(server, a.deploy_overlap)
        cpu0 -= server.spent_cpu_s - spent0
        await _hear(ps, "back")
        all_caught = time.time()
        out["deploy_clients_cpu_s"] = round(sum(_cpu_s(p.pid) for p in ps) - clients_cpu_s, 1)
    for _ in range(a.steady):
        await asyncio.sleep(a.interval)
    await live.stop()
    last = writer.top[sids[0]]
    await _tell(ps, f"last {last}")
    results: list[dict[str, Any]] = []
    for p in ps:
        results += orjson.loads(await p.stdout.readline())["clients"]
        await p.wait()
    if a.deploy:
        out["deploy"] = deploy_figures(results, restart, _pct)
    # Live events of this storm only (a later storm's clients replay the earlier storms' live events too).
    lat_all = [lat for r in results for w, lat in r["latencies"] if w >= start * 1000]
    lat_steady = [lat for r in results for w, lat in r["latencies"] if w >= all_caught * 1000]
    catch = [r["catch_up_s"] for r in results if r["catch_up_s"] is not None]
    errors: dict[str, int] = {}
    for r in results:
        for e in r["errors"]:
            errors[e] = errors.get(e, 0) + 1
    cpu_s = _cpu_s(server.pid) - cpu0
    counted = {k: v - pre[k] for k, v in _counters(url).items()}
    frames = counted["frames_sent"]
    delivered = sum(r["events"] for r in results)
    return {
        "clients": clients, "sessions": len(sids), "client_processes": len(ps), "connect_s": round(connect_s, 1),
        "completed": sum(r["ok"] for r in results), "refused": sum(bool(r["errors"]) for r in results),
        "errors": errors, "events_delivered": delivered, "events_expected": clients * last,
        "in_order": sum(r["in_order"] for r in results),
        "all_caught_up_s": round(max(r["caught_at"] for r in results) - start, 2), "live_rounds": live.rounds,
        "connect_to_all_caught_up_s": round(connect_s + max(r["caught_at"] for r in results) - start, 2),
        "catch_up_ms_p50": _pct([c * 1000 for c in catch], 0.5),
        "catch_up_ms_p99": _pct([c * 1000 for c in catch], 0.99),
        "live_latency_ms_p50": _pct(lat_all, 0.5), "live_latency_ms_p99": _pct(lat_all, 0.99),
        "steady_latency_ms_p50": _pct(lat_steady, 0.5), "steady_latency_ms_p99": _pct(lat_steady, 0.99),
        "steady_latencies": len(lat_steady),
        "server_cpu_connect_s": round(cpu_connect, 1), "server_cpu_until_caught_up_s": round(cpu_caught, 1),
        "server_cpu_s": round(cpu_s, 1),
        "clients_cpu_until_caught_up_s": round(clients_cpu_s, 1),
        "machine_cores_busy_until_caught_up": round(machine_cores, 2), **out,
        # Every frame written (events, hello, subscribed, caught_up, …) and the socket writes they took.
        **counted, "server_cpu_us_per_frame": round(cpu_s / frames * 1e6, 1) if frames else None,
    }


async def replay_store(engine: Any, n: int) -> float:
    """The long session through the shared page reads, frames included, no socket (ev/s)."""
    reads = SharedReads(FanoutStore(engine, UPSTREAM), ReadQueue(3), 1000)
    sent, after, t0 = 0, -1, time.perf_counter()
    while True:
        page = await reads.page("bench", LONG, after)
        for seq, _frame in page.frames:
            sent, after = sent + 1, seq
        if not page.full:
            break
    assert sent == n, (sent, n)
    return n / (time.perf_counter() - t0)


async def replay_socket(url: str, n: int, session: str = LONG) -> float:
    """The long session through `/v1/ws` to one client, subscribe → caught_up (ev/s)."""
    async with aiohttp.ClientSession() as http, http.ws_connect(
            f"{url}/v1/ws?token={mint_token(SECRET, UPSTREAM, None, 600)}", max_msg_size=0) as ws:
        await ws.receive()
        t0 = time.perf_counter()
        await ws.send_str(json.dumps({"op": "subscribe", "session": session}))
        got = 0
        async for msg in ws:
            m = json.loads(msg.data)
            got += m["type"] == "event"
            if m["type"] == "caught_up":
                break
        assert got == n, (got, n)
        return n / (time.perf_counter() - t0)


async def run(db_url: str, a: argparse.Namespace) -> dict[str, Any]:
    engine = make_engine(db_url, pool_size=10)
    await upgrade_to_head(engine)
    writer = Writer(EventStore(engine, UPSTREAM))
    sids = [f"{PREFIX}{i:05d}" for i in range(a.sessions)]
    t0 = time.perf_counter()
    for i in range(0, len(sids), 8):
        await asyncio.gather(*(writer.write(s, [event(s, q) for q in range(1, a.stored + 1)]) for s in sids[i:i + 8]))
    for start in range(1, a.long + 1, 1000):
        await writer.write(LONG, [event(LONG, q) for q in range(start, min(start + 1000, a.long + 1))])
    out: dict[str, Any] = {"populate_s": round(time.perf_counter() - t0, 1)}
    server = ServerProcess(db_url, a.workers, a.profile)
    try:
        await server.start()
        # The same replay on main's path (bench.write_path: one read per page, no queue), same run and load.
        # Alternated, twice each: the first read of the session also warms PostgreSQL's cache.
        for _ in range(2 if a.long else 0):
            out.setdefault("replay_direct_ev_s", []).append(
                round((await replay(engine, UPSTREAM, LONG, a.long))["events_per_s"]))
            out.setdefault("replay_shared_reads_ev_s", []).append(round(await replay_store(engine, a.long)))
        if a.long:
            out["replay_socket_ev_s"] = round(await replay_socket(server.url, a.long))
        out["storms"] = []
        for n in [a.only] if a.only else sorted({min(1000, a.clients), a.clients}):
            out["storms"].append(await storm(server, writer, sids, n, a))
            print(json.dumps(out["storms"][-1]), flush=True)
    finally:
        await server.stop()
        await engine.dispose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--stored", type=int, default=20, help="events stored per session before the storms")
    ap.add_argument("--long", type=int, default=20_000, help="events of the replayed session (0: no replay)")
    ap.add_argument("--procs", type=int, default=4, help="client processes")
    ap.add_argument("--workers", type=int, default=1, help="server processes on one port (BRIDGE_WORKERS)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between live rounds")
    ap.add_argument("--steady", type=int, default=3, help="live rounds after every client caught up")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--profile", help="cProfile the fan-out process into this file (slows it down)")
    ap.add_argument("--deploy", action="store_true", help="once every client caught up: SIGTERM the fan-out, start "
                    "a new one on the same port, every client reconnects with its after (bench.storm_deploy)")
    ap.add_argument("--deploy-overlap", action="store_true", help="with --deploy: the new process starts at the "
                    "SIGTERM, binding the port once the old one stopped listening")
    ap.add_argument("--only", type=int, help="one storm of this many clients (default: 1,000 and --clients)")
    a = ap.parse_args()
    a.deploy = a.deploy or a.deploy_overlap
    configure_logging("console", "warning")
    res = run_in_database(lambda url: run(url, a))
    res["load_average"] = os.getloadavg()
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
