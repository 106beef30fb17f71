"""One session's `/history` catch-up, pipelined one page ahead (docs/mirror.md "Catch-up").

While page n is written, page n+1 is fetched and parsed: requested `after=` the last seq of page n's
items (not the cursor, which page n's write has not moved yet). At most one page is held ahead, so
memory stays bounded. Writes stay strictly sequential: page n+1 is handed to `write` only after page n's
write returned, and the cursor moves only through what the sink returns. A write that fails (lease lost,
database, connection) drops the page ahead (its request is cancelled): the follower resumes from its
stored cursor. A page whose every item was rejected is not prefetched past: it cannot move the cursor
(`history_all_rejected`). A page over the client's body bound is asked again one event at a time
(`history_too_large` when even that is over it). Rejects of a page are recorded when it is written, so a
dropped page leaves none behind.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from structlog.typing import FilteringBoundLogger

from bridge import metrics
from bridge.errors import BadFrame, BodyTooLarge
from bridge.events import ChatEvent, Envelope, Kind, parse_envelope
from bridge.perf import turnstile
from bridge.upstream.client import UpstreamClient


@dataclass(frozen=True)
class Rejected:
    """An item that cannot be stored, and why (kept in `chat_event_rejects` by the follower)."""

    reason: str
    raw: str
    seq: int | None
    detail: str


def _json_text(item: object) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=repr)


def check(ev: ChatEvent, session_id: str, raw: Callable[[], str], log: FilteringBoundLogger) -> ChatEvent | Rejected:
    """A durable event of this session, or why not. `raw` is only needed for a reject: history items
    are not re-serialized on the happy path."""
    env = ev.envelope
    if env.seq is None:
        return Rejected("not_durable", raw(), None, f"type {env.type} without durable.seq")
    if env.aggregate_id is not None and env.aggregate_id != session_id:
        return Rejected("wrong_session", raw(), env.seq, f"aggregateID {env.aggregate_id}")
    if ev.kind is Kind.UNKNOWN:
        metrics.UNKNOWN_EVENTS.labels(stream="durable").inc()
        log.warning("unknown_event_type", type=env.type, seq=env.seq)
    return ev


def parse_item(item: object, session_id: str, normalize: Callable[[Envelope], ChatEvent],
               log: FilteringBoundLogger) -> ChatEvent | Rejected:
    """One `/history` item (already decoded JSON); nothing is written here."""
    try:
        env = parse_envelope(item)
    except BadFrame as e:
        return Rejected(e.reason, _json_text(item), None, str(e))
    return check(normalize(env), session_id, lambda: _json_text(item), log)


Parse = Callable[[object], "ChatEvent | Rejected"]
Write = Callable[[list[ChatEvent], datetime], Awaitable[None]]
Reject = Callable[[Rejected, datetime], Awaitable[None]]


@dataclass
class Page:
    events: list[ChatEvent]
    rejects: list[Rejected]
    received_at: datetime
    has_more: bool
    items: int
    last_seq: int | None  # the highest seq among the page's items, accepted or rejected


class HistoryCatchUp:
    def __init__(self, session_id: str, client: UpstreamClient, cursor: Callable[[], int], *, parse: Parse,
                 write: Write, reject: Reject, log: FilteringBoundLogger, page_size: int = 100,
                 prefetch: bool = True) -> None:
        self._sid = session_id
        self._client = client
        self._cursor = cursor
        self._parse = parse
        self._write = write
        self._reject = reject
        self._log = log
        self._page_size = page_size
        self._prefetch = prefetch
        self.pages_ahead = 0  # pages fetched while the previous one was written (tests, bench)

    async def _fetch(self, after: int, limit: int) -> Page:
        page = await self._client.history(self._sid, after, limit)
        await turnstile.for_loop().enter()  # parsing a page is CPU work: bounded per loop turn
        received_at = datetime.now(UTC)
        events: list[ChatEvent] = []
        rejects: list[Rejected] = []
        last: int | None = None
        for item in page.events:
            r = self._parse(item)
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
        after = self._cursor()
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
                    self._log.error("history_page_too_large", cursor_seq=self._cursor(), limit=limit, error=str(e))
                    if limit == 1:  # the very next event alone is over the bound: it cannot be read
                        return "history_too_large"
                    limit = 1
                    continue
                more = page.has_more and page.items > 0
                before = self._cursor()
                if page.last_seq is not None:
                    after = max(after, page.last_seq)
                if more and self._prefetch and page.events:
                    ahead = asyncio.create_task(self._fetch(max(after, before), limit),
                                                name=f"history-ahead:{self._sid}")
                    self.pages_ahead += 1
                for r in page.rejects:
                    await self._reject(r, page.received_at)
                await self._write(page.events, page.received_at)
                cursor = self._cursor()
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
