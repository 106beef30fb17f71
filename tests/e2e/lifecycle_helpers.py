"""Helpers of the lifecycle end-to-end tests (docs/lifecycle.md): bridges with lifecycle settings, lease owners,
statuses and log lines read from the database and the bridges' JSON logs."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.bridge_proc import BridgeProcess

UPSTREAM = "e2e"





async def session_row(db: AsyncEngine, sid: str) -> dict[str, Any] | None:
    async with db.connect() as c:
        row = (await c.execute(text("select lease_owner, lease_epoch, status, status_reason, incomplete "
                                    "from chat_sessions where upstream = :u and session_id = :s"),
                               {"u": UPSTREAM, "s": sid})).one_or_none()
    return None if row is None else dict(row._mapping)


async def lease_owner(db: AsyncEngine, sid: str) -> str | None:
    row = await session_row(db, sid)
    return None if row is None else row["lease_owner"]


async def status_of(db: AsyncEngine, sid: str) -> str | None:
    row = await session_row(db, sid)
    return None if row is None else row["status"]


def owner_pid(owner: str | None) -> int | None:
    """Incarnation ids are `host:pid:random` (bridge.daemon.new_incarnation_id)."""
    if owner is None:
        return None
    return int(owner.rsplit(":", 2)[1])


def log_events(bridge: BridgeProcess, event: str, since: int = 0, **fields: Any) -> list[dict[str, Any]]:
    """JSON log lines of `bridge` with this `event` (and these field values), from byte offset `since`."""
    try:
        data = bridge.log_path.read_bytes()[since:]
    except OSError:
        return []
    out = []
    for line in data.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("event") == event and all(rec.get(k) == v for k, v in fields.items()):
            out.append(rec)
    return out
