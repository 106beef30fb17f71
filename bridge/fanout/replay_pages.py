"""A new subscription's stored events, page by page, then live (docs/websocket.md, "Replay of a long
session"): pages read ahead, so PostgreSQL builds the next ones while this one is queued and sent."""

from __future__ import annotations

import asyncio
import bisect
from operator import itemgetter

from bridge.fanout.hub import Client, Hub, Subscription
from bridge.fanout.shared_reads import Page, SharedReads

_seq = itemgetter(0)


def _consume(task: asyncio.Task[Page]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a page read ahead and not used may have failed unseen


async def replay(reads: SharedReads, hub: Hub, owner: str, client: Client, sub: Subscription, head: int) -> bool:
    """Stored events with seq > sub.sent_seq, then live; False if the subscription ended meanwhile."""
    ahead: dict[int, asyncio.Task[Page]] = {}  # pages read ahead, by the `after` they were read from
    read_any = False
    try:
        while True:
            # One read per page, shared with other new subscribers (bridge.fanout.shared_reads), framed by
            # PostgreSQL (bridge.store.reads.replay).
            task = ahead.pop(sub.sent_seq, None)
            page = await task if task is not None else await reads.page(owner, sub.session_id, sub.sent_seq)
            _read_ahead(reads, owner, sub.session_id, page, ahead)
            queued = await _queue_page(client, sub, page)
            if queued is None:
                return False
            read_any = read_any or queued
            if not page.full and hub.go_live(sub, sub.sent_seq if read_any else min(sub.sent_seq, head)):
                return True
    finally:
        for task in ahead.values():
            task.cancel()


def _read_ahead(reads: SharedReads, owner: str, session_id: str, page: Page,
                ahead: dict[int, asyncio.Task[Page]]) -> None:
    """After a full page, read the next one — and, when this page's seqs are dense (a session's seqs mostly
    are), the one after it too, from the seq it most likely starts after — so that PostgreSQL builds two pages
    at once, on two connections, while this one is sent. A guess that turns out wrong is cancelled unused; a
    page read ahead is used only when its `after` is exactly the subscription's `sent_seq` then, so it is the
    read the replay would have made (rows committed since are held by the hub, as for any read)."""
    wanted: list[int] = []
    if page.full and page.frames:
        first, last = page.frames[0][0], page.frames[-1][0]
        wanted.append(last)
        if last - first + 1 == len(page.frames) == reads.page_size:
            wanted.append(last + reads.page_size)
    for after in [a for a in ahead if a not in wanted]:
        ahead.pop(after).cancel()
    for after in wanted:
        if after not in ahead:
            ahead[after] = task = asyncio.create_task(reads.page(owner, session_id, after))
            task.add_done_callback(_consume)


async def _queue_page(client: Client, sub: Subscription, page: Page) -> bool | None:
    """Queue a page's frames, waiting for room; whether any was new, None if the subscription ended. Runs of
    frames are queued in one call each (`ClientQueue.offer_durable_run`): a replay is frames back to back."""
    queue, frames, sid = client.queue, page.frames, sub.session_id
    max_frame = queue.limits.max_bytes // 2
    i = bisect.bisect_right(frames, sub.sent_seq, key=_seq)  # those at or below sent_seq are sent already
    read_any = False
    while True:
        if not queue.has_room:
            await queue.wait_room()
        if queue.closed or client.subscriptions.get(sid) is not sub:
            return None
        if i == len(frames):
            return read_any
        j = queue.offer_durable_run(sid, frames, i, max_frame)
        if j == i:  # a frame too large for the queue: sent alone, as a reference (Client._durable)
            client._durable(frames[i][1], (sid, frames[i][0]))
            j = i + 1
        sub.sent_seq = frames[j - 1][0]
        read_any = True
        i = j
