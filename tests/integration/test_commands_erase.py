"""`DELETE /v1/sessions/{id}/mirror` (docs/lifecycle.md, "Erasure"): a `control` command like any other —
scope, `command_id` exactly once, its row kept as the audit — that erases the session from the mirror, and
with `upstream: true` on the serve too; later commands on the session are refused before any row is written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from bridge.command_service import CommandService, DoorSettings
from bridge.command_service.rows import DoorStore
from bridge.http.commands import CommandsContext, add_command_routes
from bridge.store.commands_pending import PromptQueueStore
from bridge.store.writes import EventStore
from tests.support.chat_events import batch
from tests.support.commands_twin import OTHER, SID, UpstreamCommandsTwin

UPSTREAM = "it-erase"
SECRET = "e" * 40


class Twin(UpstreamCommandsTwin):
    async def session_op(self, sid: str, directory: str, method: str, tail: str,
                         body: dict[str, Any] | None) -> tuple[int, Any]:
        self.calls.append(("session_op", (sid, method, tail)))
        return 200, True


@pytest.fixture
def twin() -> Twin:
    return Twin()


@pytest.fixture
async def http(engine: AsyncEngine, twin: Twin) -> AsyncIterator[TestClient[Any, Any]]:
    store = EventStore(engine, UPSTREAM)
    for sid in (SID, OTHER):
        epoch, _ = await store.claim(sid, "owner", "/srv/agent/proj")
        await store.write_batch(sid, epoch, batch(1, 2, 3, session_id=sid), datetime.now(UTC))
    service = CommandService(DoorStore(engine, UPSTREAM), twin,  # type: ignore[arg-type]
                             DoorSettings(exit_after_upstream="", prompt_runtime="v2"),
                             queue=PromptQueueStore(engine, UPSTREAM))
    app = web.Application()
    add_command_routes(app, CommandsContext(service, SECRET))
    async with TestClient(TestServer(app)) as client:
        yield client


def auth(scope: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + mint_token(SECRET, UPSTREAM, None, 600, "dpo@example", scope=scope)}


async def count(engine: AsyncEngine, sql: str, **params: Any) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text(sql).bindparams(**params))).scalar_one())


async def test_erase_is_a_control_command_done_once_and_audited(http: TestClient[Any, Any], engine: AsyncEngine,
                                                                 twin: Twin) -> None:
    body = {"command_id": "erase-1", "reason": "user request #42"}
    refused = await http.delete(f"/v1/sessions/{SID}/mirror", json=body, headers=auth("prompt"))
    assert refused.status == 403
    assert (await http.delete(f"/v1/sessions/{SID}/mirror", json={"command_id": "x"},
                              headers=auth("control"))).status == 400  # no reason

    r = await http.delete(f"/v1/sessions/{SID}/mirror", json=body, headers=auth("control"))
    got = await r.json()
    assert r.status == 200, got
    assert got == {"command_id": "erase-1", "session_id": SID, "sessions": [SID], "rows": 4,
                   "already_erased": False, "upstream_deleted": None}
    again = await http.delete(f"/v1/sessions/{SID}/mirror", json=body, headers=auth("control"))
    assert (again.status, await again.json()) == (200, got)  # the stored answer, not a second erasure
    assert not [c for c in twin.calls if c[0] == "session_op"]

    rows = "SELECT count(*) FROM chat_session_events WHERE upstream = :u AND session_id = :s"
    assert await count(engine, rows, u=UPSTREAM, s=SID) == 0
    assert await count(engine, rows, u=UPSTREAM, s=OTHER) == 3
    audit = "SELECT count(*) FROM chat_commands WHERE upstream = :u AND command = 'erase' AND state = 'done' " \
            "AND subject = 'dpo@example' AND body->>'reason' = 'user request #42'"
    assert await count(engine, audit, u=UPSTREAM) == 1
    stone = "SELECT count(*) FROM chat_session_tombstones WHERE session_id = :s AND command_id = 'erase-1' " \
            "AND erased_by = 'dpo@example' AND (rows->>'chat_session_events')::int = 3"
    assert await count(engine, stone, s=SID) == 1

    prompt = await http.post(f"/v1/sessions/{SID}/prompt", headers=auth("control"),
                             json={"command_id": "p-1", "text": "hi", "delivery": "queue"})
    assert (prompt.status, (await prompt.json())["error"]["code"]) == (404, "not_found")
    left = "SELECT count(*) FROM chat_commands WHERE upstream = :u AND target_session = :s AND command <> 'erase'"
    assert await count(engine, left, u=UPSTREAM, s=SID) == 0


async def test_erase_with_upstream_deletes_the_session_on_the_serve(http: TestClient[Any, Any], twin: Twin) -> None:
    r = await http.delete(f"/v1/sessions/{OTHER}/mirror", headers=auth("control"),
                          json={"command_id": "erase-2", "reason": "account closed", "upstream": True})
    got = await r.json()
    assert r.status == 200, got
    assert got["upstream_deleted"] is True and got["rows"] == 4
    assert ("session_op", (OTHER, "DELETE", "")) in twin.calls
