"""Statuses as every process hears them (`NOTIFY bridge_status`, bridge.fanout.feed.CommitListener): a
listener connected before the test acts, stopped after it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from bridge.fanout.feed import CommitListener
from bridge.store.notices import StatusNotice
from tests.support.waiting import wait_until


@contextlib.asynccontextmanager
async def status_listener(database_url: str, upstream: str,
                          on_status: Callable[[StatusNotice], None]) -> AsyncIterator[None]:
    """`on_status` is called with every status committed for `upstream`, in commit order, until the exit."""
    listener = CommitListener(database_url, upstream, lambda _s, _q: None, lambda: None, on_status=on_status)
    task = asyncio.create_task(listener.run())
    await wait_until(listener.connected.is_set, 20, 0.02, message="LISTEN connected")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
