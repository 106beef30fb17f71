"""The replay statement alone: PostgreSQL's CPU per row framed, this tree's statement and an older one.

`python -m bench.replay_sql [--rounds 3] [--repeat 8] [--base DIR]` writes bench.replay's two sessions (20,000
v2 and 20,000 legacy events, embedded PostgreSQL unless BRIDGE_DATABASE_URL is set) and runs
`bridge.store.reads.replay.FRAMES_AFTER` over each whole session (`after` 0, `limit` 20,000) inside
`SELECT sum(length(frame))` — every frame built, none sent — `--repeat` times per measurement on one
connection with the generic plan, as the fan-out runs it. The figure is that backend's user + system CPU
(Linux /proc) per row. `--base DIR` (a tree with an older `bridge/`, e.g. `git archive <commit> bridge`) adds
its statement, measured alternately with this tree's in the same database, and checks both give the same rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

import bridge.store.reads.replay as replay
from bench.in_database import run_in_database
from bench.replay import LEGACY, V2, _cpu_s, populate
from bench.storm_server import UPSTREAM
from bridge.store.db import make_engine, upgrade_to_head
from bridge.store.writes.event_store import EventStore

_PRINT = "import bridge.store.reads.replay as r; print(r.FRAMES_AFTER.text)"


def base_statement(base: str) -> str:
    """The statement of the `bridge/` in `base` (printed by a Python run there)."""
    return subprocess.run([sys.executable, "-c", _PRINT], cwd=base, check=True, capture_output=True,
                          text=True).stdout


async def _cpu_per_row(engine: AsyncEngine, sql: str, params: dict[str, Any], n: int, repeat: int) -> float:
    q = text(f"SELECT sum(length(q.frame)) FROM ({sql}) q")
    async with engine.connect() as conn:
        await conn.execute(replay.GENERIC_PLAN)
        pid = int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())
        await conn.execute(q, params)  # planned, cached
        start = _cpu_s(pid)
        for _ in range(repeat):
            await conn.execute(q, params)
        return (_cpu_s(pid) - start) / repeat / n * 1e6


async def run(db_url: str, n: int, rounds: int, repeat: int, base: str | None) -> dict[str, Any]:
    engine = make_engine(db_url)
    await upgrade_to_head(engine)
    await populate(EventStore(engine, UPSTREAM), n)
    statements = [("this tree", replay.FRAMES_AFTER.text)]
    if base is not None:
        statements.append(("base", base_statement(base)))
    out: dict[str, Any] = {"events": n, "repeat": repeat, "base": base}
    try:
        for _ in range(rounds):
            for name, sid in (("v2", V2), ("legacy", LEGACY)):
                params = {"u": UPSTREAM, "s": sid, "after": 0, "limit": n, "kinds": replay._KINDS,
                          "python_kinds": replay._PYTHON_KINDS}
                for label, sql in statements:
                    cpu = await _cpu_per_row(engine, sql, params, n, repeat)
                    out.setdefault(name, {}).setdefault(f"{label} µs/row", []).append(round(cpu, 2))
        if base is not None:
            for sid in (V2, LEGACY):
                params = {"u": UPSTREAM, "s": sid, "after": 0, "limit": n, "kinds": replay._KINDS,
                          "python_kinds": replay._PYTHON_KINDS}
                async with engine.connect() as conn:
                    rows = [(await conn.execute(text(sql), params)).all() for _label, sql in statements]
                if rows[0] != rows[1]:
                    raise SystemExit(f"{sid}: this tree's rows differ from the base's")
    finally:
        await engine.dispose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=8, help="statements per measurement (CPU ticks are 10 ms)")
    ap.add_argument("--base", help="also the statement of the `bridge/` in this directory, alternately")
    a = ap.parse_args()
    res = run_in_database(lambda url: run(url, a.events, a.rounds, a.repeat, a.base))
    res["load_average"] = os.getloadavg()
    print(json.dumps(res, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
