"""`/global/event` read once per host and handed to every worker (docs/operations.md "Workers").

The parent holds the one connection to the serve's `GET /global/event` and serves the same bytes, cut at event
boundaries and otherwise untouched, on a unix socket only its workers know (same Basic credentials as the
serve). A worker's live reader (bridge.upstream.live) connects there as it would to the serve: it sees the
stream's opening `server.connected` first, then every event from the moment it joined, exactly as a fresh
connection to the serve would. When the serve's stream ends every worker's stream ends too, so each runs its
reconnect (discovery, pending-request re-sync) as it would alone. A worker that does not keep up (its queue
full) is disconnected and reconnects: it never holds the others back.

The parent routes nothing: it does not know the workers' leases or subscriptions. Each worker drops, before
decoding, the frames of the sessions it has no use for (bridge.upstream.live, docs/operations.md "Workers").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import structlog
from aiohttp import web

from bridge.backoff import Backoff
from bridge.errors import UpstreamError
from bridge.upstream.client import UpstreamClient
from bridge.upstream.sse import DEFAULT_MAX_FRAME_BYTES
from bridge.workers.policy import EventCutter, first_event

# Chunks (each one or more whole events) a worker may be behind before it is disconnected.
QUEUE_CHUNKS = 20_000
# How long a worker that connects while the serve's stream is down waits for it before a 503.
JOIN_WAIT_S = 5.0


class LiveTee:
    def __init__(self, client: UpstreamClient, *, heartbeat_timeout_s: float,
                 reconnect_min_s: float, reconnect_max_s: float) -> None:
        self._client = client
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._backoff = Backoff(reconnect_min_s, reconnect_max_s)
        self._hello: bytes | None = None  # the serve's first event on the current connection
        self._connected = asyncio.Event()
        self._readers: set[asyncio.Queue[bytes | None]] = set()
        self.connections = 0  # connections to the serve so far (tests read it)
        self._task: asyncio.Task[None] | None = None
        self._log = structlog.get_logger("bridge.workers.tee")

    @property
    def readers(self) -> int:
        return len(self._readers)

    async def run(self) -> None:
        """Reads the serve's stream for ever: reconnects with backoff, ends every reader's stream at each end."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self._read_once()
                # A clean end after a while (the serve closes it at times): back at once, as a worker alone would.
                if loop.time() - started >= 1.0:
                    self._backoff.reset()
                    delay = 0.0
                else:
                    delay = self._backoff.next_delay()
            except (UpstreamError, TimeoutError, OSError) as e:
                self._log.warning("tee_upstream_lost", error=f"{type(e).__name__}: {e}"[:300])
                delay = self._backoff.next_delay()
            finally:
                self._end_all()
            await asyncio.sleep(delay)

    async def _read_once(self) -> None:
        loop = asyncio.get_running_loop()
        cutter = EventCutter()
        async with asyncio.timeout(self._heartbeat_timeout_s) as t, self._client.open_global_events() as body:
            self.connections += 1
            async for chunk in body:
                t.reschedule(loop.time() + self._heartbeat_timeout_s)
                whole = cutter.feed(chunk)
                if cutter.pending > DEFAULT_MAX_FRAME_BYTES:
                    raise UpstreamError(f"/global/event: an event longer than {DEFAULT_MAX_FRAME_BYTES} bytes")
                if not whole:
                    continue
                if self._hello is None:
                    self._hello, whole = first_event(whole)
                    self._connected.set()
                    if not whole:
                        continue
                self._broadcast(whole)

    def _broadcast(self, data: bytes) -> None:
        for queue in list(self._readers):
            try:
                queue.put_nowait(data)
            except asyncio.QueueFull:
                self._log.warning("tee_reader_behind", queued=queue.qsize())
                self._drop(queue)

    def _drop(self, queue: asyncio.Queue[bytes | None]) -> None:
        self._readers.discard(queue)
        with suppress(asyncio.QueueFull):
            queue.put_nowait(None)
        if queue.full():  # no room for the end mark: empty it first, the reader stops at once anyway
            while not queue.empty():
                queue.get_nowait()
            queue.put_nowait(None)

    def _end_all(self) -> None:
        self._hello = None
        self._connected.clear()
        for queue in list(self._readers):
            self._drop(queue)

    def start(self) -> None:
        """The serve's stream is read from the first worker's request on (a 2.x serve's workers never ask)."""
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="tee")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._end_all()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """`GET /global/event` for one worker."""
        self.start()
        try:
            async with asyncio.timeout(JOIN_WAIT_S):
                await self._connected.wait()
        except TimeoutError:
            return web.Response(status=503, text="the serve's /global/event is not connected")
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUE_CHUNKS)
        hello = self._hello
        self._readers.add(queue)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        try:
            await response.prepare(request)
            if hello:
                await response.write(hello)
            while (data := await queue.get()) is not None:
                await response.write(data)
        finally:
            self._readers.discard(queue)
        return response


@asynccontextmanager
async def serving_tee(tee: LiveTee, path: str) -> AsyncIterator[None]:
    """The tee on the unix socket `path` inside the block; its reader of the serve stopped on the way out."""
    app = web.Application()
    app.router.add_get("/global/event", tee.handle)
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        await web.UnixSite(runner, path).start()
        yield
    finally:
        await tee.stop()
        await runner.cleanup()
