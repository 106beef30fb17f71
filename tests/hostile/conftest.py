from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from bridge.http.audit import AuditContext, add_audit_routes
from bridge.store.reads import AuditReader
from tests.support.fanout_node import SECRET, UPSTREAM


@pytest.fixture
async def audit_api(engine: AsyncEngine) -> AsyncIterator[Callable[..., Any]]:
    """An audit app on a real socket: `await audit_api(**AuditContext kwargs)` → TestClient."""
    made: list[TestClient[Any, Any]] = []

    async def make(reader: AuditReader | None = None, app: web.Application | None = None,
                   **kw: Any) -> TestClient[Any, Any]:
        app = app or web.Application()
        add_audit_routes(app, AuditContext(reader or AuditReader(engine, UPSTREAM), SECRET, **kw))
        client: TestClient[Any, Any] = TestClient(TestServer(app))
        await client.start_server()
        made.append(client)
        return client

    yield make
    for c in made:
        await c.close()


def bearer(sessions: list[str] | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {mint_token(SECRET, UPSTREAM, sessions, 600)}"}


async def session_rows(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return [str(r) for r in (await conn.execute(text("SELECT session_id FROM chat_sessions"))).scalars()]
