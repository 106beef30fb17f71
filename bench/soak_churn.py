"""Churn for the soak (bench.soak): sessions that come and go on the real serve, for the soak's length.

Every `every_s` seconds, `new` sessions are created and each gets one turn, and `returning` sessions of
those created earlier whose last turn ended more than `quiet_s` ago (longer than the bridges' idle TTL
and a sweep: released by now, unless a fault kept them) get one more: the bridges must release them and
warm them again on their live events. Turns go through the soak's own `turn` (v2 or `prompt_async`; a turn
the faults cut is counted there, not fatal); a session the serve could not create (it was down) is counted
and skipped. Every session created here joins the soak's verdict: stored == its sync log from seq 0.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import aiohttp

from tests.support.opencode import OpencodeError, OpencodeServe

RUNTIMES = ("v2", "prompt_async")  # the CLI spawns a process per turn: too heavy for dozens of sessions
DIRECTIVES = ("MOCK:text", "MOCK:tool", "MOCK:reason")


class Churn:
    def __init__(self, rng: random.Random, turn: Callable[[str, str, str], Awaitable[None]], *, every_s: float,
                 new: int, returning: int, quiet_s: float) -> None:
        self.rng, self.turn = rng, turn
        self.every_s, self.new, self.returning, self.quiet_s = every_s, new, returning, quiet_s
        self.sessions: list[str] = []
        self.counts: Counter[str] = Counter()
        self._ended: dict[str, float] = {}  # session -> monotonic time its last turn ended (absent: in a turn)
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, serve: OpencodeServe, deadline: float) -> None:
        """Rounds until `deadline` (monotonic), then wait for their turns."""
        while self.every_s > 0 and time.monotonic() < deadline:
            for _ in range(self.new):
                try:
                    sid = await serve.create_session()
                except (OpencodeError, OSError, aiohttp.ClientError):  # the serve is down: a fault
                    self.counts["create_failed"] += 1
                    continue
                self.sessions.append(sid)
                self.counts["created"] += 1
                self._start(sid)
            now = time.monotonic()
            quiet = [s for s, ended in self._ended.items() if now - ended > self.quiet_s]
            for sid in self.rng.sample(quiet, min(self.returning, len(quiet))):
                self.counts["returned"] += 1
                self._start(sid)
            await asyncio.sleep(self.every_s)
        if self._tasks:
            await asyncio.gather(*self._tasks)

    def _start(self, sid: str) -> None:
        self._ended.pop(sid, None)
        t = asyncio.create_task(self._one(sid))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _one(self, sid: str) -> None:
        try:
            await self.turn(sid, self.rng.choice(DIRECTIVES), self.rng.choice(RUNTIMES))
        finally:
            self._ended[sid] = time.monotonic()
