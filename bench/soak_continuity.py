"""The soak's continuity sessions (bench/soak.py; docs/commands.md, "Runtime affinity"): driven only by
OpenCode's CLI and by prompts through the bridge (steer or queue, to a random replica, retried with the
same command_id through the faults). Every prompt carries a marker; the report checks in the mock
provider's request log that every model request of a marked prompt carried the marker of every prompt of
its session that had reached the model before (a queued prompt may reach it after a later steer: the
order is the upstream's), and that each confirmed prompt is exactly one user message upstream."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from bridge.auth import mint_token
from tests.support.bridge_proc import BridgeProcess
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeError, OpencodeServe
from tests.support.waiting import WaitTimeout

CONTINUITY_RUNTIMES = {"cli": 1, "bridge": 2}
SECRET = "soak-secret-" + "s" * 40


class Conversations:
    def __init__(self, rng: random.Random, mock: MockLLM, turns: Counter[str], upstream: str) -> None:
        self.rng = rng
        self.mock = mock
        self.turns = turns
        self.sessions: dict[str, list[str]] = {}  # session -> markers confirmed sent, in order
        self.serve: OpencodeServe | None = None
        self.replicas: list[BridgeProcess] = []
        self.errors: list[str] = []
        # marker -> epoch s: when its first POST went out, when the bridge said `sent` (bridge prompts)
        self.started: dict[str, float] = {}
        self.confirmed: dict[str, float] = {}
        self.answers: dict[str, list[str]] = {}  # marker -> "replica:state:message_id" of each answer
        self._markers = 0
        self._token = mint_token(SECRET, upstream, None, 24 * 3600, "soak", scope="control")

    async def run(self, deadline: float, settled: Callable[[str, float], Awaitable[None]]) -> None:
        """One turn at a time per session, by the CLI or through the bridge, until `deadline`."""
        async def one(sid: str) -> None:
            while time.monotonic() < deadline:
                runtime = self.rng.choices(list(CONTINUITY_RUNTIMES), list(CONTINUITY_RUNTIMES.values()))[0]
                self._markers += 1
                marker = f"CONT{self._markers:05d}"
                directive = self.rng.choice(["MOCK:text", "MOCK:tool", "MOCK:text"])
                try:
                    if runtime == "cli":
                        assert self.serve is not None
                        await self.serve.run_cli(sid, f"{directive} {marker}")
                    else:
                        await self._bridge_prompt(sid, marker, f"{directive} {marker}")
                    self.sessions[sid].append(marker)
                    await settled(sid, 90)
                    self.turns[f"ok:continuity-{runtime}"] += 1
                except (OpencodeError, WaitTimeout, OSError, aiohttp.ClientError) as e:
                    self.turns[f"failed:continuity-{runtime}:{type(e).__name__}"] += 1
                    if len(self.errors) < 10:
                        self.errors.append(f"{marker} {runtime}: {type(e).__name__}: {e}"[:300])
                await asyncio.sleep(self.rng.uniform(0.2, 1.0))

        await asyncio.gather(*(one(sid) for sid in self.sessions))

    async def _bridge_prompt(self, sid: str, command_id: str, text_: str) -> None:
        """POST the prompt to a random replica, again with the same command_id until one answers 200 with
        `state` `sent`: a `queued` answer is re-sent until it says `sent`, as docs/commands.md ("The legacy
        queue", "Failover") asks of a client (a queued row committed on a lost primary only is queued again)."""
        body = {"command_id": command_id, "text": text_, "delivery": self.rng.choice(["steer", "queue"])}
        headers = {"Authorization": f"Bearer {self._token}"}
        end = time.monotonic() + 120
        self.started[command_id] = time.time()
        answers = self.answers.setdefault(command_id, [])
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            while True:
                b = self.rng.choice(self.replicas)
                try:
                    async with http.post(f"{b.url}/v1/sessions/{sid}/prompt", json=body, headers=headers) as r:
                        if r.status == 200:
                            got = await r.json()
                            answers.append(f"{b.name}:{got.get('state')}:{got.get('message_id')}")
                            if got.get("state") != "queued":
                                self.turns[f"bridge:{got.get('runtime')}"] += 1
                                self.confirmed[command_id] = time.time()
                                return
                        elif r.status not in (429, 503):
                            raise OpencodeError(f"bridge prompt {command_id}: HTTP {r.status} {await r.text()}")
                        else:
                            answers.append(f"{b.name}:{r.status}")
                except (OSError, aiohttp.ClientError):
                    pass  # that replica is down: another one, or this one after its restart
                if time.monotonic() > end:
                    raise WaitTimeout(f"bridge prompt {command_id} not taken")
                await asyncio.sleep(0.5 if not answers or not answers[-1].endswith(":queued") else 1.5)

    def _report_requests(self, serve_stops: list[float]) -> dict[str, Any]:
        """Every model request for a marked prompt carried every marker of its session that had reached the
        model before it (a queued prompt may reach it after a later steer: the order is the upstream's).

        A confirmed prompt that was never the newest user message of a request is a turn cut by a serve
        stop (docs/commands.md, "Exactly once": `sent` means stored upstream; the serve neither finishes nor
        retries a turn its exit cut, docs/upstream.md §7) only if the serve was stopped after its first POST
        and before the next request of its session; it is then held to the same rule from its
        confirmation on (every later request of its session carries it). Any other is `never_asked`."""
        asked = [r for r in self.mock.requests if r.directive != "title"]
        misses: list[dict[str, Any]] = []
        cut: list[str] = []
        never: list[str] = []
        requests = 0
        for sid, markers in self.sessions.items():
            mine = [r for r in asked if any(m in r.user_text for m in markers)]
            first = {m: min((r.time for r in asked if m in r.user_text), default=float("inf")) for m in markers}
            for m in (m for m in markers if first[m] == float("inf")):
                sent_at = self.confirmed.get(m, float("inf"))
                after = min((r.time for r in mine if r.time > sent_at), default=float("inf"))
                if any(self.started.get(m, sent_at) <= s <= after for s in serve_stops):
                    cut.append(m)
                    first[m] = sent_at
                else:
                    never.append(m)
            for r in mine:
                requests += 1
                seen = " ".join(r.user_texts)
                prompt = next(m for m in markers if m in r.user_text)
                missing = [m for m in markers if m != prompt and first[m] < r.time and m not in seen]
                if missing:
                    misses.append({"session": sid, "prompt": prompt, "missing": missing})
        return {"prompts": sum(len(m) for m in self.sessions.values()), "model_requests": requests,
                "misses": misses[:20], "miss_count": len(misses), "cut_by_serve_stop": cut,
                "never_asked": never, "failed_turns": self.errors}

    async def _user_messages_per_marker(self) -> dict[str, int]:
        """How many user messages of the legacy store carry each confirmed marker: 1 each, or a prompt was
        sent twice (or lost)."""
        assert self.serve is not None
        counts: dict[str, int] = {}
        for sid, markers in self.sessions.items():
            texts = [" ".join(p.get("text", "") for p in m["parts"] if p.get("type") == "text")
                     for m in await self.serve.legacy_messages(sid) if m["info"].get("role") == "user"]
            for marker in markers:
                counts[marker] = sum(1 for t in texts if marker in t)
        return counts

    async def report(self, serve_stops: list[float]) -> dict[str, Any]:
        out = self._report_requests(serve_stops)
        out["not_once"] = {m: n for m, n in (await self._user_messages_per_marker()).items() if n != 1}
        out["answers"] = {m: self.answers.get(m, []) for m in [*out["not_once"], *out["never_asked"]]}
        return out
