"""The fan-out process of `bench.storm` as the orchestrator drives it, and its deploy (`--deploy`).

A deploy as an operator runs one: the serving process gets SIGTERM (every socket is closed with 1001,
docs/websocket.md), it exits, and a new process starts on the same port (with `--workers N`, the parent
and its N workers both times). Live rounds keep being written meanwhile. Every client, closed with 1001,
reconnects (retrying while the port refuses) and subscribes with `after` = the last seq it has
(bench.storm_clients `--reconnect`); the figure is the last 1001 → the last `caught_up` after it.
`--deploy-overlap`: the new process is started at the SIGTERM, not after the old one exited (several
bridge processes may share one database: the old one only closes its sockets meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from typing import Any


class ServerProcess:
    """bench.storm_server on a port: started, stopped with SIGTERM (its CPU then read from its last line)."""

    def __init__(self, db_url: str, workers: int, profile: str | None) -> None:
        self._db_url, self._workers, self._profile = db_url, workers, profile
        self.process: asyncio.subprocess.Process | None = None
        self.port = 0
        self.spent_cpu_s = 0.0  # CPU of the processes stopped so far (a deploy's old one)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> None:
        extra = ["--profile", self._profile] if self._profile else []
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.storm_server", "--database-url", self._db_url, "--workers",
            str(self._workers), "--port", str(self.port), *extra, stdout=asyncio.subprocess.PIPE)
        assert self.process.stdout is not None
        self.port = json.loads(await self.process.stdout.readline())["port"]

    async def stop(self) -> None:
        p = self.process
        if p is None or p.returncode is not None:
            return
        p.terminate()
        self.process = None  # a deploy's new one may start meanwhile
        assert p.stdout is not None
        line = await p.stdout.readline()
        await p.wait()
        if line:
            self.spent_cpu_s += json.loads(line)["cpu_s"]


class LiveRounds:
    """One live event to every session each `interval` s, in the background, until stopped."""

    def __init__(self, write_round: Any, interval: float) -> None:
        self._write_round, self._interval = write_round, interval
        self.rounds = 0
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            await self._write_round()
            self.rounds += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), max(0.0, self._interval - (time.monotonic() - started)))

    async def stop(self) -> None:
        """After the round being written (every session then has the same last seq)."""
        if self._task is not None:
            self._stop.set()
            await self._task


async def redeploy(server: ServerProcess, overlap: bool) -> dict[str, float]:
    """SIGTERM → exited → the new process ready on the same port (seconds of each step). With `overlap` the
    new process starts at the SIGTERM and binds the port as soon as the old one stopped listening (its
    first step), while the old one is still closing its sockets."""
    t0 = time.time()
    stopped: dict[str, float] = {}

    async def stop() -> None:
        await server.stop()
        stopped["at"] = time.time()

    if overlap:
        old = asyncio.create_task(stop())
        await asyncio.sleep(0)  # the SIGTERM is sent first
        await server.start()
        t2 = time.time()
        await old
    else:
        await stop()
        await server.start()
        t2 = time.time()
    return {"sigterm_at": t0, "old_exited_s": round(stopped["at"] - t0, 2), "new_ready_s": round(t2 - t0, 2),
            "ready_at": t2}


def deploy_figures(results: list[dict[str, Any]], restart: dict[str, float], pct: Any) -> dict[str, Any]:
    """From the clients' results: the spread of the 1001s, last 1001 → all caught up again, per client."""
    closed = [r["closed_at"] for r in results if r["closed_at"]]
    back = [r["back_at"] for r in results if r["back_at"]]
    if not closed:
        return {"closed_1001": 0}
    last_close = max(closed)
    per_client = [(r["back_at"] - r["closed_at"]) * 1000 for r in results if r["back_at"] and r["closed_at"]]
    return {
        "closed_1001": len(closed), "back": len(back),
        "sigterm_at": round(restart["sigterm_at"], 2),
        "sigterm_to_first_1001_s": round(min(closed) - restart["sigterm_at"], 2),
        "first_to_last_1001_s": round(last_close - min(closed), 2),
        "old_exited_s": restart["old_exited_s"], "new_ready_s": restart["new_ready_s"],
        "last_1001_to_all_caught_up_s": round(max(back) - last_close, 2) if back else None,
        "new_ready_to_all_caught_up_s": round(max(back) - restart["ready_at"], 2) if back else None,
        "closed_to_caught_up_ms_p50": pct(per_client, 0.5), "closed_to_caught_up_ms_p99": pct(per_client, 0.99),
        "reconnects_max": max(r["connects"] for r in results) - 1,
    }
