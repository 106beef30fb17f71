"""Queue → socket for one `/v1/ws` connection, with send coalescing (docs/websocket.md §3, "Slow clients").

Every frame is still its own WebSocket message (RFC 6455 §5.2: a text frame, FIN set); what is coalesced is
the socket write. aiohttp's `send_str` hands each frame to the transport on its own, and an idle transport
makes one `send` system call per write: the largest single cost of a 10,000-client catch-up
(BENCHMARKS.md, "Subscribe storms"). Here the frames queued for a client are taken together (up to
`BATCH_MAX_BYTES`), framed in one buffer, written with one `transport.write`, and the transport is drained
once per batch — aiohttp's own flow control (`StreamWriter.drain`), as `send_str` drains every 256 KiB.

A socket that negotiated permessage-deflate (browsers offer it) keeps aiohttp's per-frame path: its frames
are compressed in one deflate context, message by message, which only aiohttp's writer may advance.

Backpressure is unchanged: a batch leaves the queue only when the previous one is in the transport's buffer
below its high-water mark, so what has left the queue but not the socket is at most one batch (64 KiB) —
less than the 256 KiB aiohttp's writer lets through between two drains. A slow client's queue fills and
overflows by the same rules (bridge.fanout.queue), and it is closed 4429 as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections.abc import Iterable

import structlog
from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

from bridge.fanout import metrics
from bridge.fanout import protocol as p
from bridge.fanout.hub import Client

BATCH_MAX_BYTES = 64 * 1024  # asyncio's default high-water mark of a transport's write buffer
CLOSE_TIMEOUT_S = 5.0

_FIN_TEXT = 0x81  # FIN + opcode 1 (text); a server's frames are not masked (RFC 6455 §5.1)
_LEN7 = struct.Struct("!BB").pack
_LEN16 = struct.Struct("!BBH").pack
_LEN64 = struct.Struct("!BBQ").pack

_log = structlog.get_logger("bridge.ws")


def text_frames(frames: Iterable[str]) -> bytes:
    """The frames as RFC 6455 server text frames (unfragmented, unmasked), back to back in one buffer."""
    parts: list[bytes] = []
    for frame in frames:
        data = frame.encode()
        n = len(data)
        if n < 126:
            parts.append(_LEN7(_FIN_TEXT, n))
        elif n < 65536:
            parts.append(_LEN16(_FIN_TEXT, 126, n))
        else:
            parts.append(_LEN64(_FIN_TEXT, 127, n))
        parts.append(data)
    return b"".join(parts)


def close_code(reason: str | None) -> tuple[int, str | None]:
    """The close code and the `error` code sent before it, for why the bridge ends a connection."""
    if reason == "slow_consumer":
        return p.CLOSE_SLOW_CONSUMER, p.ERR_SLOW_CONSUMER
    if reason == "token_expired":
        return p.CLOSE_TOKEN_EXPIRED, p.ERR_TOKEN_EXPIRED
    if reason == "token_revoked":
        return p.CLOSE_UNAUTHORIZED, p.ERR_TOKEN_REVOKED
    return p.CLOSE_GOING_AWAY, None


async def _write_batch(ws: web.WebSocketResponse, stream: AbstractStreamWriter, frames: list[str]) -> None:
    if ws.compress:
        for frame in frames:  # one deflated message each, in aiohttp's deflate context
            await ws.send_str(frame)
        metrics.WS_SOCKET_WRITES.inc(len(frames))
        return
    transport = stream.transport
    if transport is None or transport.is_closing():
        raise ConnectionResetError("connection lost")
    transport.write(text_frames(frames))
    metrics.WS_SOCKET_WRITES.inc()
    await stream.drain()  # waits only while the transport's buffer is above its high-water mark


async def write_queue(ws: web.WebSocketResponse, stream: AbstractStreamWriter, client: Client) -> None:
    """Queue → socket until the queue closes, then the close of `client.close_reason`, if any. A stuck
    socket blocks only this task; the queue bounds what piles up behind it."""
    while True:
        batch = await client.queue.get_batch(BATCH_MAX_BYTES)
        if batch is None:
            break
        if ws.closed:
            return
        try:
            await _write_batch(ws, stream, [frame for frame, _, _ in batch])
        except ConnectionError:  # the client went away; the reader loop ends on its own
            client.queue.close()
            return
        metrics.WS_FRAMES_SENT.inc(len(batch))
        written, now = client.written, 0.0
        for _, stamp, key in batch:
            if stamp:  # a delta: how long it waited (one clock read per batch: its frames left together)
                now = now or time.monotonic()
                metrics.DELTA_QUEUE_SECONDS.observe(now - stamp)
            if key is not None:
                written[key[0]] = key[1]
    if ws.closed or client.close_reason is None:
        return
    code, error = close_code(client.close_reason)
    metrics.WS_CLOSED.labels(code=str(code)).inc()
    _log.warning("ws_closing", client=client.id, reason=client.close_reason, code=code)
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            if error is not None:
                await ws.send_str(p.dumps(p.error_message(error, client.close_reason.replace("_", " "),
                                                          resume=client.resume_points())))
            await ws.close(code=code, message=client.close_reason.encode())
    if not ws.closed:  # the client does not even read its close frame: drop the TCP connection
        await ws.close(code=code)
