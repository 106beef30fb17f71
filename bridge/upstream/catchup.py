"""One session's `/history` catch-up, pipelined one page ahead (docs/mirror.md "Catch-up").

While page n is written, page n+1 is fetched and parsed: requested `after=` the last seq of page n's
items (not the cursor, which page n's write has not moved yet). At most one page is held ahead, so
memory stays bounded. Writes stay strictly sequential, through the session's `SessionIngest`: page n+1
is written only after page n's write returned, and the cursor moves only through what the sink returns.
A write that fails (lease lost, database, connection) drops the page ahead (its request is cancelled):
the follower resumes from its stored cursor. A page whose every item was rejected is not prefetched
past: it cannot move the cursor (`history_all_rejected`). A page over the client's body bound is asked
again one event at a time (`history_too_large` when even that is over it). Rejects of a page are
recorded when it is written, so a dropped page leaves none behind.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from structlog.typing import FilteringBoundLogger

from bridge import metrics
from bridge.errors import BodyTooLarge
from bridge.events import ChatEvent
from bridge.upstream.admit import Rejected, parse_item
from bridge.upstream.client import UpstreamClient
from bridge.upstream.ingest import SessionIngest


@dataclass
class Page:
    events: list[ChatEvent]
    rejects: list[Rejected]
    received_at: datetime
    has_more: bool
    items: int
    last_seq: int | None  # the highest seq among the page's items, accepted or rejected


class HistoryCatchUp:
    def __init__(self, ingest: SessionIngest, client: UpstreamClient, log: FilteringBoundLogger, *,
                 page_size: int = 100, prefetch: bool = True) -> None:
        self._ingest = ingest
        self._sid = ingest.session_id
        self._client = client
        self._log = log
        self._page_size = page_size
        self._prefetch = prefetch

    async def _fetch(self, after: int, limit: int) -> Page:
        page = await self._client.history(self._sid, after, limit)
        await self._ingest.pace()  # parsing a page is CPU work: bounded per loop turn
        received_at = datetime.now(UTC)
        events: list[ChatEvent] = []
        rejects: list[Rejected] = []
        last: int | None = None
        for item in page.events:
            r = parse_item(item, self._sid, self._ingest.map, self._log)
            if isinstance(r, Rejected):
                rejects.append(r)
            else:
                events.append(r)
            if r.seq is not None and (last is None or r.seq > last):
                last = r.seq
        return Page(events, rejects, received_at, page.has_more, len(page.events), last)

    async def run(self) -> str | None:
        """Page until the upstream has no more; returns why the cursor cannot move, or None."""
        limit = self._page_size
        after = self._ingest.cursor
        ahead: asyncio.Task[Page] | None = None
        try:
            while True:
                try:
                    if ahead is not None:
                        task, ahead = ahead, None
                        page = await task
                    else:
                        page = await self._fetch(after, limit)
                except BodyTooLarge as e:
                    metrics.REJECTS.labels(reason="history_too_large").inc()
                    self._log.error("history_page_too_large", cursor_seq=self._ingest.cursor, limit=limit, error=str(e))
                    if limit == 1:  # the very next event alone is over the bound: it cannot be read
                        return "history_too_large"
                    limit = 1
                    continue
                more = page.has_more and page.items > 0
                before = self._ingest.cursor
                if page.last_seq is not None:
                    after = max(after, page.last_seq)
                if more and self._prefetch and page.events:
                    ahead = asyncio.create_task(self._fetch(max(after, before), limit),
                                                name=f"history-ahead:{self._sid}")
                for r in page.rejects:
                    await self._ingest.reject_item(r, page.received_at)
                await self._ingest.write(page.events, page.received_at, "history")
                cursor = self._ingest.cursor
                after = max(after, cursor)
                if not more:
                    return None
                if cursor == before and not page.events:
                    # Every item of the page was rejected (e.g. another session's aggregate): the pass
                    # ends instead of paging on through answers that are not this session's. A page whose
                    # events were all stored already (a repair ran meanwhile) is not that: `after` moved.
                    return "history_all_rejected"
        finally:
            if ahead is not None:  # the write failed (or we are stopped): the page ahead is dropped
                ahead.cancel()
                await asyncio.wait({ahead})
                if not ahead.cancelled():
                    ahead.exception()  # retrieved: its error is not the one that ends this pass
