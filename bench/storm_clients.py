"""WebSocket clients of `bench.storm`, in a process of their own (several run side by side, so the client
side is not what is measured). Client k (each with a token of its own, as browsers have) subscribes to
session k mod S from the start of its history.

Lines with the orchestrator: out `connected` once every socket is open; in `go` → every client sends its
subscribe at once; out `caught` once every client has had its `caught_up`; in `last N` → the last seq each
session will have; out one JSON line of results once every client has seq N (or at the deadline).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import aiohttp

from bench.storm_server import SECRET, UPSTREAM
from bridge.auth import mint_token


class StormClient:
    def __init__(self, session: str) -> None:
        self.session = session
        self.seqs: list[int] = []
        self.errors: list[str] = []
        self.subscribed_at = 0.0
        self.caught_at = 0.0
        self.latencies: list[tuple[float, float]] = []  # (written at, ms to receipt), live events only
        self.last = -1
        self.done = asyncio.Event()
        self.caught = asyncio.Event()

    def _message(self, text: str) -> None:
        m = json.loads(text)
        t = m.get("type")
        if t == "event":
            self.seqs.append(m["seq"])
            written = m["data"].get("t_w")
            if written is not None:
                self.latencies.append((written, time.time() * 1000 - written))
            if self.last >= 0 and m["seq"] >= self.last:
                self.done.set()
        elif t == "caught_up":
            self.caught_at = time.time()
            self.caught.set()
        elif t == "error":
            self.errors.append(m["code"])
            if m["code"] not in ("rate_limited",):  # a refused subscription: nothing more will come
                self.caught.set()
                self.done.set()

    def expect(self, last: int) -> None:
        self.last = last
        if (self.seqs and self.seqs[-1] >= last) or self.errors:
            self.done.set()

    async def run(self, ws: aiohttp.ClientWebSocketResponse, go: asyncio.Event) -> None:
        """Read from the moment the socket is open (the bridge's pings are answered while the others
        connect), subscribe at `go`."""
        reader = asyncio.create_task(self._read(ws))
        await go.wait()
        self.subscribed_at = time.time()
        await ws.send_str(json.dumps({"op": "subscribe", "session": self.session}))
        await reader

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for msg in ws:
            if msg.type is aiohttp.WSMsgType.TEXT:
                self._message(msg.data)
        if not self.done.is_set():  # closed by the bridge before the end
            self.errors.append(f"closed:{ws.close_code}")
        self.caught.set()
        self.done.set()

    def result(self) -> dict[str, Any]:
        ok = not self.errors and self.last >= 0 and self.seqs == list(range(1, self.last + 1))
        return {"ok": ok, "errors": self.errors, "events": len(self.seqs),
                "in_order": all(a < b for a, b in zip(self.seqs, self.seqs[1:], strict=False)),
                "catch_up_s": self.caught_at - self.subscribed_at if self.caught_at else None,
                "caught_at": self.caught_at, "latencies": self.latencies}


async def _connect(http: aiohttp.ClientSession, url: str, gate: asyncio.Semaphore, client: StormClient,
                   go: asyncio.Event) -> tuple[aiohttp.ClientWebSocketResponse, asyncio.Task[None]]:
    token = mint_token(SECRET, UPSTREAM, None, 3600)
    async with gate:
        for attempt in range(5):
            try:
                ws = await http.ws_connect(f"{url}/v1/ws?token={token}", heartbeat=None, max_msg_size=0)
                await ws.receive(timeout=60)  # hello
                return ws, asyncio.create_task(client.run(ws, go))
            except (aiohttp.ClientError, TimeoutError):
                if attempt == 4:
                    raise
                await asyncio.sleep(0.5 * (attempt + 1))  # a refused connect under the accept backlog: again
    raise AssertionError("unreachable")


async def _line() -> str:
    return (await asyncio.to_thread(sys.stdin.readline)).strip()


async def run(url: str, first: int, count: int, sessions: int, prefix: str, deadline_s: float) -> dict[str, Any]:
    clients = [StormClient(f"{prefix}{(first + i) % sessions:05d}") for i in range(count)]
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as http:
        gate = asyncio.Semaphore(64)
        t0 = time.monotonic()
        go = asyncio.Event()
        opened = await asyncio.gather(*(_connect(http, url, gate, c, go) for c in clients))
        sockets, readers = [ws for ws, _ in opened], [r for _, r in opened]
        print(f"connected {time.monotonic() - t0:.2f}", flush=True)
        assert await _line() == "go"
        go.set()
        try:  # a client that never catches up is reported (not ok), it does not hang the bench
            async with asyncio.timeout(deadline_s):
                await asyncio.gather(*(c.caught.wait() for c in clients))
        except TimeoutError:
            pass
        print("caught", flush=True)
        cmd, _, n = (await _line()).partition(" ")
        assert cmd == "last"
        for c in clients:
            c.expect(int(n))
        try:
            async with asyncio.timeout(deadline_s):
                await asyncio.gather(*(c.done.wait() for c in clients))
        except TimeoutError:
            pass
        for ws in sockets:
            await ws.close()
        for r in readers:
            r.cancel()
    return {"clients": [c.result() for c in clients]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", required=True)
    ap.add_argument("--first", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--sessions", type=int, required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--deadline", type=float, default=120.0)
    a = ap.parse_args()
    res = asyncio.run(run(a.url, a.first, a.count, a.sessions, a.prefix, a.deadline))
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
