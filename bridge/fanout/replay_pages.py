"""A new subscription's stored events, page by page, then live (docs/websocket.md, "Replay of a long
session"): one page read ahead, so PostgreSQL builds the next page while this one is queued and sent."""

from __future__ import annotations

import asyncio

from bridge.fanout.hub import Client, Hub, Subscription
from bridge.fanout.shared_reads import Page, SharedReads


def _consume(task: asyncio.Task[Page]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: a page read ahead and not used may have failed unseen


async def replay(reads: SharedReads, hub: Hub, owner: str, client: Client, sub: Subscription, head: int) -> bool:
    """Stored events with seq > sub.sent_seq, then live; False if the subscription ended meanwhile."""
    ahead: tuple[int, asyncio.Task[Page]] | None = None
    read_any = False
    try:
        while True:
            # One read per page, shared with other new subscribers (bridge.fanout.shared_reads), framed by
            # PostgreSQL (bridge.store.reads.replay).
            if ahead is not None and ahead[0] == sub.sent_seq:
                page = await ahead[1]
            else:
                page = await reads.page(owner, sub.session_id, sub.sent_seq)
            ahead = None
            if page.full and page.frames:
                last = page.frames[-1][0]
                ahead = last, asyncio.create_task(reads.page(owner, sub.session_id, last))
                ahead[1].add_done_callback(_consume)
            queued = await _queue_page(client, sub, page)
            if queued is None:
                return False
            read_any = read_any or queued
            if not page.full and hub.go_live(sub, sub.sent_seq if read_any else min(sub.sent_seq, head)):
                return True
    finally:
        if ahead is not None and not ahead[1].done():
            ahead[1].cancel()


async def _queue_page(client: Client, sub: Subscription, page: Page) -> bool | None:
    """Queue a page's frames, waiting for room; whether any was new, None if the subscription ended."""
    queue = client.queue
    read_any = False
    for seq, frame in page.frames:
        if not queue.has_room:  # no await per frame while there is room: a replay is frames back to back
            await queue.wait_room()
        if queue.closed or client.subscriptions.get(sub.session_id) is not sub:
            return None
        if seq > sub.sent_seq:
            sub.sent_seq = seq
            read_any = True
            client._durable(frame, (sub.session_id, seq))
    if queue.closed or client.subscriptions.get(sub.session_id) is not sub:
        return None
    return read_any
