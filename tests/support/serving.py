"""An aiohttp application served on a free loopback port for the length of a block."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web


@contextlib.asynccontextmanager
async def served(app: web.Application) -> AsyncIterator[str]:
    """`app` listening on 127.0.0.1 (handlers cancelled when their client goes); its base URL."""
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
