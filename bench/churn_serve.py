"""`bench.wire_serve`'s fake serve with sessions that come and go, for `bench.churn` (the same wire: durable
streams, `/global/event` with sync twins, `/sync/history` answered like the real 1.18.33, docs/upstream.md
§3, §14, §15).

It starts with no session. Each `POST /_bench/round` creates `--new` sessions of `--events` events (seq 0,
`session.created.1`, then 1..events-1, every `--legacy-every`-th legacy) and appends `--extend` events to
`--returning` sessions picked at random (seeded) among the ones that existed before the round: the bridge's
idle GC has released most of those, so their twins bring them back. The events are published like a live
serve's, step by step across all the round's sessions (bus event and sync twin on `/global/event`, the v2
ones on their durable streams); the answer comes once all are published. `GET /api/session` lists every
session, newest first. Counters (`GET /_bench/counters`) add the rounds, the sessions created and picked,
and the items `/sync/history` answered (every call).

Usage: python -m bench.churn_serve [--new 200] [--events 10] [--returning 200] [--extend 10]
       [--legacy-every 4] [--seed 1] [--port 0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
from typing import Any

import orjson
from aiohttp import web

from bench import wire_workload as w
from bench.wire_answers import json_answer
from bench.wire_serve import WireServe, serve_forever


class ChurnServe(WireServe):
    def __init__(self, new: int, events: int, returning: int, extend: int, legacy_every: int, seed: int) -> None:
        super().__init__(sessions=0, events=0, burst=0, legacy_every=legacy_every)
        self.new, self.events, self.returning, self.extend = new, events, returning, extend
        self.legacy_every = legacy_every
        self.rng = random.Random(seed)
        self.rounds = 0
        self.picked = 0  # older sessions extended, all rounds (a session picked twice counts twice)
        self._lock = asyncio.Lock()

    async def listing(self, request: web.Request) -> web.Response:
        body = orjson.dumps({"data": [w.session_item(s.k) for s in reversed(self.sessions)],
                             "cursor": {"previous": None, "next": None}})
        return web.Response(body=body, content_type="application/json")

    def _steps(self) -> list[list[tuple[w.WireSession, w.WireEvent]]]:
        """The round's events, step by step: step i holds every new session's seq i and every picked older
        session's i-th new event. New sessions join `self.sessions` here (their logs fill as published)."""
        older = self.sessions[:]
        picked = [older[i] for i in self.rng.sample(range(len(older)), min(self.returning, len(older)))]
        fresh = [w.WireSession(k, w.session_id(k)) for k in range(len(older), len(older) + self.new)]
        self.sessions.extend(fresh)
        self.by_id.update((s.id, s) for s in fresh)
        self.ids = frozenset(self.by_id)
        self.picked += len(picked)
        steps: list[list[tuple[w.WireSession, w.WireEvent]]] = []
        for i in range(max(self.events, self.extend if picked else 0)):
            step = [(s, w.created(s.k, live=True) if i == 0 else w.event(s.k, i, self.legacy_every))
                    for s in fresh if i < self.events]
            step += [(s, w.event(s.k, s.seqs[-1] + 1 + i, self.legacy_every)) for s in picked if i < self.extend]
            steps.append(step)
        return steps

    async def publish_round(self, request: web.Request) -> web.Response:
        async with self._lock:  # rounds never interleave: a session's seqs are published in order
            started = time.time()
            steps = self._steps()
            events = 0
            for step in steps:
                for s, e in step:
                    s.add(e)
                self._publish(b"".join(e.globals for _, e in step))
                events += len(step)
                self.published += len(step)
                await asyncio.sleep(0)  # let the streams write this step
            self.rounds += 1
            return json_answer({"round": self.rounds, "events": events, "started_at": started,
                                "published_s": time.time() - started})

    def snapshot(self) -> dict[str, Any]:
        return {**super().snapshot(), "rounds": self.rounds, "sessions": len(self.sessions), "picked": self.picked}

    def control(self) -> dict[str, Any]:
        return {**super().control(), "/_bench/round": self.publish_round}


async def serve(a: argparse.Namespace) -> None:
    await serve_forever(ChurnServe(a.new, a.events, a.returning, a.extend, a.legacy_every, a.seed), a.port)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--new", type=int, default=200, help="sessions created per round")
    ap.add_argument("--events", type=int, default=10, help="events of a new session (seq 0 included)")
    ap.add_argument("--returning", type=int, default=200, help="older sessions extended per round")
    ap.add_argument("--extend", type=int, default=10, help="events appended to each of them")
    ap.add_argument("--legacy-every", type=int, default=4, help="every Nth seq a legacy event (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port", type=int, default=0)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(ap.parse_args()))


if __name__ == "__main__":
    main()
