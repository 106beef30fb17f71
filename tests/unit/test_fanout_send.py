"""Send coalescing (bridge.http.ws_send): the frames written in one buffer are exactly what aiohttp's own
writer sends frame by frame, and the queue hands out batches in order, bounded in bytes."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import WSMsgType
from aiohttp._websocket.writer import WebSocketWriter

from bridge.fanout.queue import ClientQueue, QueueLimits
from bridge.http.ws_send import text_frames

SID = "ses_a"
SIZES = [0, 1, 125, 126, 127, 65535, 65536, 70000]


class _Capture:
    """A transport that keeps what is written (aiohttp's writer needs only these two methods here)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False


class _Protocol:
    _paused = False


def _parse(buf: bytes) -> list[tuple[int, bytes]]:
    """RFC 6455 §5.2, server side (no mask): (first byte, payload) of each frame."""
    out, i = [], 0
    while i < len(buf):
        first, second = buf[i], buf[i + 1]
        assert second & 0x80 == 0  # a server never masks
        n, i = second & 0x7F, i + 2
        if n == 126:
            n, i = int.from_bytes(buf[i:i + 2], "big"), i + 2
        elif n == 127:
            n, i = int.from_bytes(buf[i:i + 8], "big"), i + 8
        out.append((first, buf[i:i + n]))
        i += n
    return out


@pytest.mark.parametrize("size", SIZES)
async def test_a_frame_is_byte_for_byte_what_aiohttp_sends(size: int) -> None:
    capture = _Capture()
    writer = WebSocketWriter(_Protocol(), capture)  # type: ignore[arg-type]
    text = ("é" * size)[: size // 2] + "x" * (size - size // 2)  # multi-byte characters: bytes ≠ characters
    await writer.send_frame(text.encode(), WSMsgType.TEXT)
    assert text_frames([text]) == b"".join(capture.writes)


def test_many_frames_are_one_buffer_of_whole_frames_in_order() -> None:
    frames = ["x" * n for n in SIZES] + ['{"type":"event","seq":1,"t":"ü"}']
    parsed = _parse(text_frames(frames))
    assert [first for first, _ in parsed] == [0x81] * len(frames)  # FIN, text: one message each
    assert [payload.decode() for _, payload in parsed] == frames
    assert text_frames([]) == b""


async def test_a_batch_is_what_is_queued_in_order_bounded_in_bytes() -> None:
    q = ClientQueue(QueueLimits(max_messages=100, max_bytes=10_000))
    for seq in range(1, 6):
        assert q.offer_durable("d" * 10, (SID, seq))
    assert q.offer_ephemeral("e" * 10, 2.5)
    assert await q.get_batch(35) == [("d" * 10, 0.0, (SID, 1)), ("d" * 10, 0.0, (SID, 2)),
                                     ("d" * 10, 0.0, (SID, 3))]
    assert len(q) == 3 and q.bytes == 30
    assert await q.get_batch(1000) == [("d" * 10, 0.0, (SID, 4)), ("d" * 10, 0.0, (SID, 5)),
                                       ("e" * 10, 2.5, None)]
    assert len(q) == 0 and q.bytes == 0
    assert q.offer_durable("big" * 100, (SID, 6))
    assert await q.get_batch(10) == [("big" * 100, 0.0, (SID, 6))]  # one frame, however large


async def test_a_batch_waits_for_a_frame_frees_room_and_ends_with_none_once_closed() -> None:
    q = ClientQueue(QueueLimits(max_messages=4, max_bytes=10_000))
    waiting = asyncio.create_task(q.get_batch(100))
    await asyncio.sleep(0)
    assert not waiting.done()
    for seq in range(1, 3):
        q.offer_durable(f"f{seq}", (SID, seq))
    batch = await waiting
    assert batch is not None and [f for f, _, _ in batch] == ["f1", "f2"]
    for seq in range(3, 5):
        q.offer_durable(f"f{seq}", (SID, seq))
    assert not q._room.is_set()  # at half the messages: a replay waits …
    await q.get_batch(100)
    assert q._room.is_set()  # … until a batch leaves
    q.offer_durable("f5")
    q.close()
    assert await q.get_batch(100) is None
