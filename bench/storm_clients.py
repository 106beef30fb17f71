"""WebSocket clients of `bench.storm`, in a process of their own (several run side by side; their CPU is
counted apart from the fan-out's). Client k (each with a token of its own, as browsers have) subscribes to
session k mod S from the start of its history.

The clients are as cheap to run as the bridge lets a client be, so that on a shared machine the figure is
the server's: one `asyncio.Protocol` per socket speaking RFC 6455 itself (the HTTP upgrade, masked client
frames, unmasked server frames, ping → pong, the close handshake) and one `orjson.loads` per frame —
no HTTP client library per socket. What is measured is unchanged: connect (upgrade + `hello`), subscribe
(with `after` when resuming) and `caught_up`, every event's seq checked (1..last, in order, none twice).

Lines with the orchestrator: out `connected T` once every socket has its `hello`; in `go` → every client
sends its subscribe at once; out `caught` once every client has had its `caught_up`; with `--reconnect`
(a deploy, bench.storm_deploy): a client closed with 1001 reconnects as the product's client does
(clients/typescript/src/socket.ts: full jitter, random() x min(30 s, 0.5 s x 2^attempt) before each try) and
subscribes with `after` = the last seq it has; out
`back` once every client has been closed with 1001 and caught up again; in `last N` → the last seq each
session will have; out one JSON line of results once every client has seq N (or at the deadline).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import hashlib
import os
import random
import sys
import time
from typing import Any

import orjson

from bench.storm_server import SECRET, UPSTREAM
from bridge.auth import mint_token

_ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 §1.3
GOING_AWAY = 1001
OP_TEXT, OP_CLOSE, OP_PING, OP_PONG = 1, 8, 9, 10


def client_frame(opcode: int, payload: bytes) -> bytes:
    """One final client frame, masked with a random key (RFC 6455 §5.3); payloads under 64 KiB."""
    n = len(payload)
    head = bytes((0x80 | opcode, 0x80 | n)) if n < 126 else bytes((0x80 | opcode, 0xFE)) + n.to_bytes(2, "big")
    mask = os.urandom(4)
    key = (mask * (n // 4 + 1))[:n]
    return head + mask + (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")


class WsProtocol(asyncio.Protocol):
    """One socket: the upgrade, then server frames parsed from a buffer and handed to its StormClient."""

    def __init__(self, client: StormClient, request: bytes, key: bytes) -> None:
        self.client = client
        self._request = request
        self._accept = base64.b64encode(hashlib.sha1(key + _ACCEPT_GUID).digest())
        self._buf = bytearray()
        self._upgraded = False
        self.transport: asyncio.Transport | None = None
        self.close_code: int | None = None
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self._request)

    def send(self, opcode: int, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(client_frame(opcode, payload))

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        if not self._upgraded:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buf[:end]).lower()
            del buf[:end + 4]
            if not head.startswith(b"http/1.1 101") or b"sec-websocket-accept: " + self._accept.lower() not in head:
                self.client.error(f"upgrade:{head[:40]!r}")
                self._close()
                return
            self._upgraded = True
        pos, n = 0, len(buf)
        while n - pos >= 2:
            b0, size, p = buf[pos], buf[pos + 1] & 0x7F, pos + 2
            if size == 126:
                if n - p < 2:
                    break
                size, p = int.from_bytes(buf[p:p + 2], "big"), p + 2
            elif size == 127:
                if n - p < 8:
                    break
                size, p = int.from_bytes(buf[p:p + 8], "big"), p + 8
            if n - p < size:
                break
            payload, pos = bytes(buf[p:p + size]), p + size
            self._frame(b0, payload)
        if pos:
            del buf[:pos]

    def _frame(self, b0: int, payload: bytes) -> None:
        opcode = b0 & 0x0F
        if opcode == OP_TEXT and b0 & 0x80:
            self.client.message(orjson.loads(payload))
        elif opcode == OP_PING:
            self.send(OP_PONG, payload)
        elif opcode == OP_CLOSE:
            self.close_code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
            self.send(OP_CLOSE, payload[:2])
            self._close()
        elif opcode != OP_PONG:
            self.client.error(f"frame:{b0:#x}")  # the bridge never fragments nor sends binary frames

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(self.close_code)


class StormClient:
    def __init__(self, session: str, host: str, port: int) -> None:
        self.session = session
        self._host, self._port = host, port
        token = mint_token(SECRET, UPSTREAM, None, 3600)
        self._path = f"/v1/ws?token={token}".encode()
        self.proto: WsProtocol | None = None
        self.seqs: list[int] = []
        self.errors: list[str] = []
        self.subscribed_at = self.caught_at = self.closed_at = self.back_at = 0.0
        self.latencies: list[tuple[float, float]] = []  # (written at, ms to receipt), live events only
        self.last = -1
        self.hello = asyncio.Event()
        self.caught = asyncio.Event()
        self.back = asyncio.Event()  # caught up again after a 1001 (--reconnect)
        self.done = asyncio.Event()
        self.connects = 0

    def message(self, m: dict[str, Any]) -> None:
        t = m.get("type")
        if t == "event":
            self.seqs.append(m["seq"])
            written = m["data"].get("t_w")
            if written is not None:
                self.latencies.append((written, time.time() * 1000 - written))
            if self.last >= 0 and m["seq"] >= self.last:
                self.done.set()
        elif t == "hello":
            self.hello.set()
        elif t == "caught_up":
            if self.closed_at:
                self.back_at = self.back_at or time.time()
                self.back.set()
            else:
                self.caught_at = time.time()
                self.caught.set()
        elif t == "error" and m["code"] != "rate_limited":
            self.error(m["code"])  # a refused subscription: nothing more will come

    def error(self, what: str) -> None:
        self.errors.append(what)
        for e in (self.hello, self.caught, self.back, self.done):
            e.set()

    def expect(self, last: int) -> None:
        self.last = last
        if (self.seqs and self.seqs[-1] >= last) or self.errors:
            self.done.set()

    async def connect(self, attempts: int, backoff_s: float, first_wait: bool = False) -> None:
        """Open the socket and wait for `hello`; a refused connect (the accept backlog, a restarting
        bridge) is tried again after random() x min(`backoff_s`, 0.5 s x 2^attempt) (before the first
        try too with `first_wait`)."""
        loop = asyncio.get_running_loop()
        for attempt in range(attempts):
            if first_wait or attempt:
                await asyncio.sleep(random.random() * min(backoff_s, 0.5 * 2 ** (attempt - (not first_wait))))
            key = base64.b64encode(os.urandom(16))
            request = (b"GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
                       % (self._path, self._host.encode(), self._port, key))
            self.hello.clear()
            try:
                _, self.proto = await loop.create_connection(functools.partial(WsProtocol, self, request, key),
                                                             self._host, self._port)
                hello = asyncio.ensure_future(self.hello.wait())
                await asyncio.wait([hello, self.proto.lost], timeout=60, return_when=asyncio.FIRST_COMPLETED)
                hello.cancel()
                if self.hello.is_set() and not self.errors:
                    self.connects += 1
                    return
            except OSError:
                pass
        self.error("connect")

    def subscribe(self) -> None:
        op: dict[str, Any] = {"op": "subscribe", "session": self.session}
        if self.seqs:
            op["after"] = self.seqs[-1]
        assert self.proto is not None
        self.subscribed_at = self.subscribed_at or time.time()
        self.proto.send(OP_TEXT, orjson.dumps(op))

    async def run(self, go: asyncio.Event, reconnect: bool) -> None:
        """Subscribe at `go`; with `reconnect`, once closed with 1001, connect again and resume."""
        await go.wait()
        if self.errors or self.proto is None:
            return
        self.subscribe()
        code = await self.proto.lost
        if reconnect and code == GOING_AWAY and not self.done.is_set():
            self.closed_at = time.time()
            await self.connect(attempts=20, backoff_s=30.0, first_wait=True)
            if not self.errors:
                self.subscribe()
                code = await self.proto.lost
        if not self.done.is_set():  # closed by the bridge before the end
            self.error(f"closed:{code}")

    def result(self) -> dict[str, Any]:
        ok = not self.errors and self.last >= 0 and self.seqs == list(range(1, self.last + 1))
        return {"ok": ok, "errors": self.errors, "events": len(self.seqs), "connects": self.connects,
                "in_order": all(a < b for a, b in zip(self.seqs, self.seqs[1:], strict=False)),
                "catch_up_s": self.caught_at - self.subscribed_at if self.caught_at else None,
                "caught_at": self.caught_at, "closed_at": self.closed_at, "back_at": self.back_at,
                "latencies": self.latencies}


async def _line() -> str:
    return str(await asyncio.to_thread(sys.stdin.readline)).strip()


async def _all(events: list[asyncio.Event], deadline_s: float) -> None:
    """Until every event is set or the deadline: a client that never gets there is reported (not ok)."""
    try:
        async with asyncio.timeout(deadline_s):
            for e in events:
                await e.wait()
    except TimeoutError:
        pass


async def run(a: argparse.Namespace) -> dict[str, Any]:
    host, _, port = a.url.removeprefix("http://").partition(":")
    clients = [StormClient(f"{a.prefix}{(a.first + i) % a.sessions:05d}", host, int(port)) for i in range(a.count)]
    gate = asyncio.Semaphore(a.parallel)

    async def connect(c: StormClient) -> None:
        async with gate:
            await c.connect(attempts=5, backoff_s=2.0)

    t0 = time.monotonic()
    await asyncio.gather(*(connect(c) for c in clients))
    print(f"connected {time.monotonic() - t0:.2f}", flush=True)
    assert await _line() == "go"
    go = asyncio.Event()
    runs = [asyncio.create_task(c.run(go, a.reconnect)) for c in clients]
    go.set()
    await _all([c.caught for c in clients], a.deadline)
    print("caught", flush=True)
    if a.reconnect:
        await _all([c.back for c in clients], a.deadline)
        print("back", flush=True)
    cmd, _, n = (await _line()).partition(" ")
    assert cmd == "last"
    for c in clients:
        c.expect(int(n))
    await _all([c.done for c in clients], a.deadline)
    for c in clients:
        if c.proto is not None:
            c.proto.send(OP_CLOSE, (1000).to_bytes(2, "big"))
            c.proto._close()
    for r in runs:
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
    ap.add_argument("--parallel", type=int, default=256, help="upgrades in flight at once")
    ap.add_argument("--reconnect", action="store_true", help="after a 1001, reconnect and resume (a deploy)")
    a = ap.parse_args()
    res = asyncio.run(run(a))
    sys.stdout.buffer.write(orjson.dumps(res) + b"\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
