"""Run a coroutine in the background for the length of a block: cancelled and awaited when it ends, so
no test leaves a task behind (the `running(...)` helpers of the test modules are built on it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


@contextlib.asynccontextmanager
async def in_background(coro: Coroutine[Any, Any, T]) -> AsyncIterator[asyncio.Task[T]]:
    task = asyncio.create_task(coro)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
