"""Replay of one long session to one client, v2 turns and legacy turns (numbers for BENCHMARKS.md).

`python -m bench.replay [--events 20000] [--rounds 2]` writes, in one database (embedded PostgreSQL, fsync on,
unless BRIDGE_DATABASE_URL is set), two sessions of `--events` stored events each:
- **v2 turns**: the captured tool turn of `fixtures/opencode-1.18.33/b-tool-turn` (durable envelopes), repeated,
  as `bench.write_path` writes its long session;
- **legacy turns**: the captured legacy tool turn of `fixtures/opencode-1.18.33/x9-sync-history` (its sync
  log's first 38 items: `message.updated`, `message.part.updated`, `session.updated`), repeated with fresh
  message, part, call and event ids, mapped by one `LegacyTurnState` as the ingest maps them (milestones
  once, re-sends after).

Then, per session and alternately (`--rounds` times): the replay as the store path reads it (pages of
frames, `FanoutStore.frames_after` + `replay_frames`: PostgreSQL builds what it can), the same with every
row framed in Python (`events_after` + `event_frames`: what a legacy row cost before), and the whole replay
to one client over `/v1/ws` (subscribe → `caught_up`, through bench.storm_server's fan-out process), with
the CPU per event of the fan-out process, PostgreSQL and the client. The client is bench.replay_client's lean
reader (it frames and counts, at about 1 µs per event); `--aiohttp-client` adds the same replay to aiohttp's
client with `json.loads` per message (7 to 9 µs per event of the same cores). `--base DIR` adds, alternately, the same
socket replay through a fan-out process running an older `bridge/` (before / after in one run and database).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.in_database import run_in_database
from bench.replay_client import lean_replay
from bench.storm import replay_socket
from bench.storm_server import UPSTREAM
from bench.write_path_phases import frames, replay
from bridge.events import ChatEvent, normalize, parse_frame
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_state import LegacyTurnState
from bridge.events.syncframes import parse_sync_item
from bridge.log import configure_logging
from bridge.store.db import make_engine, upgrade_to_head
from bridge.store.writes.event_store import EventStore

LEGACY_TEMPLATE = Path("fixtures/opencode-1.18.33/x9-sync-history/04-sync-history-sid-0.json")
LEGACY_ITEMS = 38  # the legacy tool turn; the items after it are a v2 turn
_IDS = re.compile(r'"((?:evt|msg|prt|call)_[A-Za-z0-9_]+)"')
V2, LEGACY = "ses_replayv2", "ses_replaylegacy"


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int, part: slice = slice(11, 13)) -> float:
    """User + system CPU seconds of a process (Linux /proc); `part=slice(12, 13)`: system only."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[part]) / _TICK


def _pg_cpu_s(db_url: str) -> float | None:
    """CPU seconds of the embedded PostgreSQL: its postmaster and every backend (the socket in `host=`)."""
    if "host=/" not in db_url:
        return None
    postmaster = int((Path(db_url.split("host=")[1].split("&")[0]) / "postmaster.pid").read_text().split()[0])
    total = _cpu_s(postmaster)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            if int(text.rsplit(")", 1)[1].split()[1]) == postmaster:
                total += _cpu_s(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return total


async def _socket(url: str, db_url: str, server_pid: int, sid: str, n: int, lean: bool) -> dict[str, float]:
    """One replay to one client over the socket (the lean reader of bench.replay_client, or aiohttp's client
    with `json.loads` per message): ev/s, and CPU µs per event of the fan-out process (and of its system
    part: the socket writes), of PostgreSQL and of this (the client's) process."""
    srv0, sys0, pg0, me0 = _cpu_s(server_pid), _cpu_s(server_pid, slice(12, 13)), _pg_cpu_s(db_url), time.process_time()
    ev_s = await (lean_replay(url, n, sid) if lean else replay_socket(url, n, sid))
    out = {"ev_s": round(ev_s), "server_cpu_us": round((_cpu_s(server_pid) - srv0) / n * 1e6, 1),
           "server_sys_us": round((_cpu_s(server_pid, slice(12, 13)) - sys0) / n * 1e6, 1),
           "client_cpu_us": round((time.process_time() - me0) / n * 1e6, 1)}
    pg1 = _pg_cpu_s(db_url)
    if pg0 is not None and pg1 is not None:
        out["postgres_cpu_us"] = round((pg1 - pg0) / n * 1e6, 1)
    return out


def legacy_events(sid: str, n: int) -> list[ChatEvent]:
    """n stored legacy events of session `sid` (seq 1..n): the captured turn again and again, new ids each."""
    body = json.loads(LEGACY_TEMPLATE.read_text())["response"]["body"][:LEGACY_ITEMS]
    template = json.dumps(body).replace(str(body[0]["aggregate_id"]), sid)
    state, out = LegacyTurnState(), list[ChatEvent]()
    turn = 0
    while len(out) < n:
        items = json.loads(_IDS.sub(rf'"\1_r{turn}"', template))
        for item in items[: n - len(out)]:
            item["seq"] = len(out) + 1
            out.append(normalize_legacy(parse_sync_item(item), state))
        turn += 1
    return out


async def populate(store: EventStore, n: int) -> None:
    for sid, events in ((V2, [normalize(parse_frame(f)) for f in frames(V2, n)]), (LEGACY, legacy_events(LEGACY, n))):
        epoch, _ = await store.claim(sid, "bench")
        for i in range(0, n, 1000):
            await store.write_batch(sid, epoch, events[i:i + 1000], datetime.now(UTC))


async def _server(db_url: str, base: str | None, profile: str | None = None) -> tuple[asyncio.subprocess.Process, str]:
    """bench.storm_server's fan-out process, on this tree's `bridge/` or on the one in `base` (with cProfile
    stats written to `profile` when it ends)."""
    env = dict(os.environ)
    if base is not None:  # `bridge` from base (the working directory comes first), `bench` from this tree
        env["PYTHONPATH"] = os.pathsep.join([str(Path.cwd()), env.get("PYTHONPATH", "")])
    extra = ["--profile", profile] if profile else []
    server = await asyncio.create_subprocess_exec(sys.executable, "-m", "bench.storm_server", "--database-url", db_url,
                                                  *extra, stdout=asyncio.subprocess.PIPE, cwd=base, env=env)
    assert server.stdout is not None
    return server, f"http://127.0.0.1:{json.loads(await server.stdout.readline())['port']}"


async def run(db_url: str, n: int, rounds: int, base: str | None, profile: str | None = None,
              aiohttp_client: bool = False) -> dict[str, Any]:
    engine = make_engine(db_url)
    await upgrade_to_head(engine)
    await populate(EventStore(engine, UPSTREAM), n)
    out: dict[str, Any] = {"events": n, "base": base}
    servers = [("socket", *await _server(db_url, None, profile))]
    if base is not None:
        servers.append(("base_socket", *await _server(db_url, base)))
    try:
        for _ in range(rounds):  # alternated: the first read of a session also warms PostgreSQL's cache
            for name, sid in (("v2", V2), ("legacy", LEGACY)):
                res = out.setdefault(name, {})
                for path, python in (("store_path", False), ("python_frames", True)):
                    r = await replay(engine, UPSTREAM, sid, n, python=python)
                    res.setdefault(f"{path}_ev_s", []).append(round(r["events_per_s"]))
                    res.setdefault(f"{path}_cpu_us", []).append(round(r["cpu_us_per_event"], 1))
                for label, server, url in servers:
                    for client, lean in (("", True), ("aiohttp_", False))[: 1 + aiohttp_client]:
                        for key, value in (await _socket(url, db_url, server.pid, sid, n, lean)).items():
                            res.setdefault(f"{client}{label}_{key}", []).append(value)
    finally:
        for _label, server, _url in servers:
            server.terminate()
            await server.wait()
        await engine.dispose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--base", help="also replay over the socket through the fan-out of the `bridge/` package in "
                    "this directory (e.g. `git archive <commit> bridge | tar -x -C DIR`), alternately: before/after")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--aiohttp-client", action="store_true", help="also replay to aiohttp's client (`json.loads` "
                    "per message, as bench.storm reads), after the lean reader of bench.replay_client")
    ap.add_argument("--profile", help="write cProfile stats of this tree's fan-out process here (slows it down)")
    a = ap.parse_args()
    configure_logging("console", "warning")
    res = run_in_database(lambda url: run(url, a.events, a.rounds, a.base, a.profile, a.aiohttp_client))
    res["load_average"] = os.getloadavg()
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
