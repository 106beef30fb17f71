"""Soak: the real `opencode serve` 1.18.33 under a steady workload, two bridge replicas sharing one
database, and a stream of real faults -- then the proof: every session's stored (seq, event_id) list equals
the upstream's own sync log (`POST /sync/history {sid: 0}`: legacy and v2 events), with no reject and no
recorded gap.

    make soak                                      # 10 minutes, seed from the clock
    .venv/bin/python -m bench.soak --minutes 3 --seed 7
    .venv/bin/python -m bench.soak --minutes 2 --failover   # a replicated database, and a failover fault

Faults (bench/soak_faults.py), one every 2-6 s (weights in FAULTS): SIGKILL of a replica (restarted 0-3 s
later), SIGKILL of one worker of a replica (each runs `--workers`, default 2: its parent starts another,
docs/operations.md "Workers"), SIGTERM of a replica (restarted at once), SIGTERM or SIGKILL of `opencode
serve` (restarted on the same port and home), every bridge connection to PostgreSQL terminated
(`pg_terminate_backend`), and with `--failover` the primary SIGKILLed after its standby was cut off, the
standby promoted (docs/scaling.md). The workload prompts random sessions with the mock provider's directives
(text, tools, reasoning, slow streams) through three runtimes (weights in RUNTIMES): the v2 API, legacy
`prompt_async` (as the web app does) and OpenCode's own CLI (`opencode run --attach … --session …`), so most
sessions mix both runtimes; prompts that fail because the serve is down are counted, not fatal. Exit status 1
(bench/soak_verdict.py) when the database and the sync log differ, or when any stored event is of kind
`unknown` (the report lists those types: map them in bridge/events/). Before the first fault, one
`prompt_async` turn each of a subagent (`task`), a plan (`todowrite`) and a file write, so that those kinds
are in the database whatever the faults do later (`subagent_sessions` in the report counts the children
stored).

Churn (bench/soak_churn.py): every `--churn-every-s` (10 s) `--churn-new` sessions are created with one turn
each, and `--churn-returning` older ones, quiet for longer than the bridges' idle TTL (`--idle-ttl-s`, 20 s:
released by then), get another; every one of them is in the verdict.

Continuity (docs/commands.md, "Runtime affinity"): `--continuity-sessions` more sessions are driven only
by OpenCode's CLI and by prompts through the bridge (steer or queue, to a random replica, retried with the
same command_id through the faults; a `queued` answer is re-sent until it says `sent`, as docs/commands.md
asks of a client after a failover). Every prompt carries a marker; afterwards the mock provider's request
log must show, for every model request of such a prompt, the marker of every prompt of its session that
had reached the model before: the model saw the whole conversation whichever client drove each turn. A
confirmed prompt that never reached the model is accepted only as a turn cut by a serve stop (a stop after
its first POST and before its session's next request; then every later request must carry it).
Exit status 1 on any miss, on any other prompt that never reached the model, or when a confirmed prompt is
not exactly one user message upstream.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shutil
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from bench.soak_churn import Churn
from bench.soak_continuity import SECRET, Conversations
from bench.soak_faults import Faults, admin_sql
from bench.soak_lifecycle import Lifecycle
from bench.soak_verdict import logged, verdict
from bridge.store.embedded import start_embedded
from tests.support.bridge_proc import BridgeProcess
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeError, OpencodeServe
from tests.support.replication import ReplicatedPostgres
from tests.support.waiting import WaitTimeout, wait_until

REPO = Path(__file__).resolve().parents[1]
UPSTREAM = "soak"
# What a user does with OpenCode's default tools too (docs/upstream.md §20-§22): a subagent (`task`, a child
# session), a plan (`todowrite`), a file written (`write`: `patch` parts, `session.diff`).
DIRECTIVES = ["MOCK:text", "MOCK:tool", "MOCK:reason", "MOCK:slow:20:0.05", "MOCK:slowtool:1",
              "MOCK:task", "MOCK:todo", "MOCK:write"]
# Before the first fault, one turn of each through `prompt_async`, so that their events are stored whatever the faults
# do to later turns (a subagent turn rarely completes between faults 2-6 s apart).
CONTENT_TURNS = ["MOCK:task", "MOCK:todo", "MOCK:write"]
RUNTIMES = {"v2": 2, "prompt_async": 1, "cli": 1}


def _database(server_url: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))


class Soak:
    def __init__(self, args: argparse.Namespace, workdir: Path, database_url: str,
                 pair: ReplicatedPostgres | None = None) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.workdir = workdir
        self.database_url = database_url
        self.turns: Counter[str] = Counter()
        self.sessions: list[str] = []
        self.mock = MockLLM(log_path=workdir / "mock-llm.jsonl")
        self.serve: OpencodeServe | None = None
        self.replicas: list[BridgeProcess] = []
        self._busy: set[str] = set()
        self.talk = Conversations(self.rng, self.mock, self.turns, UPSTREAM)
        self.faults = Faults(self.rng, database_url, self.replicas, pair)
        self.churn = Churn(random.Random(args.seed + 1), self._turn, every_s=args.churn_every_s, new=args.churn_new,
                           returning=args.churn_returning, quiet_s=args.idle_ttl_s + 10)
        self.lifecycle = Lifecycle(workdir, database_url, UPSTREAM)

    async def run(self) -> int:
        await self.mock.start()
        self.serve = OpencodeServe(Path(self.args.opencode), self.workdir / "opencode", self.mock.base_url)
        await self.serve.start()
        for i in range(self.args.replicas):
            b = BridgeProcess(self.workdir, self.serve.base_url, self.database_url, name=f"bridge-{i}",
                              extra_env={"BRIDGE_UPSTREAM_NAME": UPSTREAM, "BRIDGE_AUTH_SECRET": SECRET,
                                         "BRIDGE_IDLE_TTL_S": f"{self.args.idle_ttl_s:g}",
                                         "BRIDGE_WORKERS": str(self.args.workers)})
            b.start()
            self.replicas.append(b)
        for b in self.replicas:
            await b.wait_ready(60)
        for _ in range(self.args.sessions):
            self.sessions.append(await self.serve.create_session())
        for _ in range(self.args.continuity_sessions):
            self.talk.sessions[await self.serve.create_session()] = []
        self.talk.serve, self.talk.replicas = self.serve, self.replicas
        self.faults.serve = self.serve
        for i, directive in enumerate(CONTENT_TURNS):
            # legacy: the v2 runtime has no `task` tool (docs/upstream.md §20)
            await self._turn(self.sessions[i % len(self.sessions)], directive, "prompt_async")

        started = time.monotonic()
        deadline = started + self.args.minutes * 60
        work = asyncio.create_task(self._workload(deadline))
        talk = asyncio.create_task(self.talk.run(deadline, self._settled))
        churn = asyncio.create_task(self.churn.run(self.serve, deadline))
        # Halfway: the session that ran the subagent turn is erased, and a retention run (bench/soak_lifecycle.py).
        life = asyncio.create_task(self.lifecycle.midway(self.args.minutes * 30, self.sessions[0])) \
            if self.args.lifecycle else None
        await self.faults.inject(deadline)
        await work
        await talk
        await churn
        if life is not None:
            await life
        return await self._verify(started)

    async def _workload(self, deadline: float) -> None:
        tasks: set[asyncio.Task[None]] = set()
        while time.monotonic() < deadline:
            idle = [s for s in self.sessions if s not in self._busy]
            if idle:
                sid = self.rng.choice(idle)
                self._busy.add(sid)
                runtime = self.rng.choices(list(RUNTIMES), list(RUNTIMES.values()))[0]
                t = asyncio.create_task(self._turn(sid, self.rng.choice(DIRECTIVES), runtime))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
            await asyncio.sleep(self.rng.uniform(0.2, 1.0))
        if tasks:
            await asyncio.gather(*tasks)

    async def _turn(self, sid: str, directive: str, runtime: str) -> None:
        assert self.serve is not None
        try:
            if runtime == "cli":
                await self.serve.run_cli(sid, f"{directive} soak turn")
            elif runtime == "prompt_async":
                await self.serve.prompt_async(sid, f"{directive} soak turn")
            else:
                await self.serve.prompt(sid, f"{directive} soak turn")
            await self._settled(sid, 90)
            self.turns[f"ok:{runtime}"] += 1
        except (OpencodeError, WaitTimeout, OSError, aiohttp.ClientError) as e:  # the serve was down mid-turn
            self.turns[f"failed:{type(e).__name__}"] += 1
        finally:
            self._busy.discard(sid)

    async def _settled(self, sid: str, timeout: float) -> None:
        """The session is not active upstream and its sync log did not grow, on three polls in a row
        (both runtimes: a legacy turn has no `prompt.admitted` to wait for)."""
        assert self.serve is not None
        serve = self.serve
        seen: list[int] = []

        async def quiet() -> bool:
            busy = sid in await serve.active()
            seen.append(-1 if busy else len(await serve.sync_history(sid, 0)))
            last = seen[-3:]
            return len(last) == 3 and last[0] >= 0 and last.count(last[0]) == 3

        await wait_until(quiet, timeout, 0.3, message=f"session {sid} settled")

    async def _verify(self, started: float) -> int:
        assert self.serve is not None
        for b in self.replicas:
            if b.proc is None or b.proc.poll() is not None:
                b.start()
        for b in self.replicas:
            await b.wait_ready(60)
        quiet = time.monotonic()
        sessions = self.lifecycle.kept([*self.sessions, *self.talk.sessions, *self.churn.sessions])
        v = await verdict(self.database_url, UPSTREAM, self.serve, sessions, self._settled)
        leftovers = await self.lifecycle.leftovers()
        if not v.queue_drained:
            self.turns["queue_not_drained"] += 1
        report: dict[str, Any] = {
            "converged": v.converged,
            "rejects": v.rejects,
            "unrepaired_gaps": v.gaps,
            "legacy_events": v.legacy_events,
            "unknown_kind_types": v.unknown,  # type -> rows of kind `unknown`; must be empty
            "subagent_sessions": v.subagent_sessions,  # child sessions stored (their seq 0 names a parent)
            "minutes": self.args.minutes,
            "seed": self.args.seed,
            "replicas": self.args.replicas,
            "sessions": len(self.sessions),
            # Sessions created and released sessions prompted again (bench/soak_churn.py), idle releases.
            "churn": {**self.churn.counts, "idle_ttl_s": self.args.idle_ttl_s,
                      **logged(self.replicas, ("session_idle_release", "lease_claimed"))},
            "upstream_events": v.upstream_events,
            "turns": dict(self.turns),
            "faults": dict(self.faults.counts),
            "converged_after_s": round(time.monotonic() - quiet, 1),
            # What the bridges found the database had lost and re-read (docs/scaling.md, "Failover").
            "rows_lost_in_failovers": self.faults.rows_lost,
            "lost_commit_repairs": logged(self.replicas, ("cursor_behind_database", "session_row_lost",
                                                          "command_row_recovered")),
            # The legacy send claim and the lost-row lookup at work (docs/commands.md, "Exactly once").
            "legacy_send_guards": logged(self.replicas, ("legacy_send_held", "legacy_send_overtaken",
                                                         "legacy_prompt_earlier_attempt")),
            "footprint": v.footprint,
            "lifecycle": {**self.lifecycle.report, "erased_rows_left": leftovers},
            "wall_s": round(time.monotonic() - started, 1),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        }
        if not v.converged:
            report["mismatch (stored, upstream)"] = {s: c for s, c in v.counts.items() if c[0] != c[1]}
        cont = report["continuity"] = await self.talk.report(self.faults.serve_stops)
        print(json.dumps(report, indent=2))
        continuous = (cont["miss_count"] == 0 and not cont["not_once"] and not cont["never_asked"]
                      and not self.turns["queue_not_drained"])
        if v.unknown:
            print(f"stored events of kind 'unknown' (map them in bridge/events/): {sorted(v.unknown)}")
        erased_clean = not any(leftovers.values())
        return 0 if v.converged and v.rejects == 0 and v.gaps == 0 and continuous and not v.unknown \
            and erased_clean else 1

    async def close(self) -> None:
        for b in self.replicas:
            b.stop()
        if self.serve is not None:
            with contextlib.suppress(Exception):
                await self.serve.close()
        await self.mock.stop()


async def main(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="bridge-soak-"))
    if args.failover:
        return await _main_replicated(args, workdir)
    pg = None
    server_url = os.environ.get("BRIDGE_DATABASE_URL")
    if not server_url:
        pg = start_embedded(workdir / "pg")
        server_url = pg.url
    name = f"soak_{uuid.uuid4().hex[:12]}"
    await admin_sql(server_url, f'CREATE DATABASE "{name}"')
    soak = Soak(args, workdir, _database(server_url, name))
    try:
        rc = await soak.run()
    finally:
        await soak.close()
        await admin_sql(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if pg is not None:
            pg.stop()
    if rc == 0 and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"logs kept in {workdir}")
    return rc


async def _main_replicated(args: argparse.Namespace, workdir: Path) -> int:
    pair = await asyncio.to_thread(ReplicatedPostgres.create)
    soak = Soak(args, workdir, pair.multi_host_url(), pair)
    try:
        rc = await soak.run()
    finally:
        await soak.close()
        await asyncio.to_thread(pair.destroy)
    if rc == 0 and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"logs kept in {workdir}")
    return rc


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--sessions", type=int, default=6)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="BRIDGE_WORKERS of each replica (kill9_worker kills one)")
    ap.add_argument("--continuity-sessions", type=int, default=3,
                    help="sessions driven by the CLI and by prompts through the bridge only")
    ap.add_argument("--churn-every-s", type=float, default=10.0, help="0: no churn")
    ap.add_argument("--churn-new", type=int, default=2, help="sessions created per churn round")
    ap.add_argument("--churn-returning", type=int, default=2, help="released sessions prompted again per round")
    ap.add_argument("--idle-ttl-s", type=float, default=20.0, help="the bridges' BRIDGE_IDLE_TTL_S")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--opencode", default=os.environ.get(
        "OPENCODE_BIN", str(REPO / ".opencode" / "node_modules" / ".bin" / "opencode")))
    ap.add_argument("--failover", action="store_true",
                    help="a primary and a streaming standby; adds the failover fault (docs/scaling.md)")
    ap.add_argument("--lifecycle", action=argparse.BooleanOptionalAction, default=True,
                    help="erase a session and run retention halfway (bench/soak_lifecycle.py; default on)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs) after a success")
    return ap.parse_args()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(parse_args())))
