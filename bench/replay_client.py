"""A lean `/v1/ws` client for bench.replay: one subscribe, then WebSocket frames counted off the socket.

What bench.replay measures is the bridge; the aiohttp client (`ws.receive` + `json.loads` per message, as
bench.storm's `replay_socket` reads) spends 7 to 9 µs per event itself, on the same two cores, and a replay is
a pipeline — PostgreSQL, the fan-out process and the client share them. This reader does the least a client
can (RFC 6455 framing by hand: an unmasked text frame per message from the server, the subscribe masked as a
client must), so the CPU left to the bridge is the bridge's and the client's own share is measured apart.
Each message is told by its prefix (the bridge writes `type` first); the first and the last `event` are
decoded to check they are seq 1 and seq n of the session, and the count must be n.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import time
from urllib.parse import urlsplit

from bench.storm_server import SECRET, UPSTREAM
from bridge.auth import mint_token

_EVENT = b'{"type":"event"'
_CAUGHT_UP = b'{"type":"caught_up"'


def client_frame(text: str, opcode: int = 1) -> bytes:
    """One masked client frame (RFC 6455 §5.3)."""
    data = text.encode()
    mask = os.urandom(4)
    n = len(data)
    head = struct.pack("!BB", 0x80 | opcode, 0x80 | n) if n < 126 else struct.pack("!BBH", 0x80 | opcode, 0xFE, n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


class _Reader(asyncio.Protocol):
    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.upgraded: asyncio.Future[None] = loop.create_future()
        self.caught_up: asyncio.Future[None] = loop.create_future()
        self.buf = bytearray()
        self.events = 0
        self.first: bytes | None = None
        self.last = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        for fut in (self.upgraded, self.caught_up):
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection lost: {exc}"))

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        if not self.upgraded.done():
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            if not buf.startswith(b"HTTP/1.1 101"):
                self.upgraded.set_exception(ConnectionError(bytes(buf[:end]).decode(errors="replace")))
                return
            del buf[:end + 4]
            self.upgraded.set_result(None)
        self._frames()

    def _frames(self) -> None:
        buf, pos, size = self.buf, 0, len(self.buf)
        last: tuple[int, int] | None = None
        while size - pos >= 2:
            n, head = buf[pos + 1] & 0x7F, 2
            if n == 126:
                if size - pos < 4:
                    break
                n, head = int.from_bytes(buf[pos + 2:pos + 4], "big"), 4
            elif n == 127:
                if size - pos < 10:
                    break
                n, head = int.from_bytes(buf[pos + 2:pos + 10], "big"), 10
            if size - pos < head + n:
                break
            start, opcode = pos + head, buf[pos] & 0x0F
            pos = start + n
            if opcode == 1 and buf.startswith(_EVENT, start):
                self.events += 1
                if self.first is None:
                    self.first = bytes(buf[start:pos])
                last = start, pos
            elif opcode == 1 and buf.startswith(_CAUGHT_UP, start) and not self.caught_up.done():
                self.caught_up.set_result(None)
            elif opcode == 9 and self.transport is not None:  # a ping: answered, as any client must
                self.transport.write(client_frame(bytes(buf[start:pos]).decode(), opcode=10))
            elif opcode == 8 and not self.caught_up.done():
                self.caught_up.set_exception(ConnectionError(f"closed: {bytes(buf[start:pos])!r}"))
        if last is not None:
            self.last = bytes(buf[last[0]:last[1]])
        del buf[:pos]


async def lean_replay(url: str, n: int, session: str) -> float:
    """The session through `/v1/ws` to one lean client, subscribe → caught_up (ev/s)."""
    u = urlsplit(url)
    loop = asyncio.get_running_loop()
    transport, reader = await loop.create_connection(_Reader, u.hostname or "127.0.0.1", u.port or 80)
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        transport.write((f"GET /v1/ws?token={mint_token(SECRET, UPSTREAM, None, 600)} HTTP/1.1\r\n"
                         f"Host: {u.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        await reader.upgraded
        t0 = time.perf_counter()
        transport.write(client_frame(json.dumps({"op": "subscribe", "session": session})))
        await reader.caught_up
        took = time.perf_counter() - t0
        assert reader.events == n, (reader.events, n)
        assert reader.first is not None and json.loads(reader.first)["seq"] == 1, reader.first
        assert json.loads(reader.last)["seq"] == n, reader.last[:200]
        return n / took
    finally:
        transport.write(client_frame("", opcode=8))
        transport.close()
