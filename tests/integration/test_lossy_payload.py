"""jsonb cannot hold U+0000: the event is stored (lossy, flagged) and its exact text kept in rejects."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.payload import REPLACEMENT
from bridge.store.schema import chat_event_rejects, chat_session_events
from bridge.store.writes import BatchResult, EventStore
from tests.support.chat_events import RECEIVED_AT, SESSION, batch, chat_event

pytestmark = pytest.mark.usefixtures("write_path")  # both ways rows go in (conftest)


async def _select_all(engine: AsyncEngine, table: Any) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        return [dict(r._mapping) for r in await conn.execute(select(table))]


async def test_a_nul_in_the_payload_is_stored_replaced_and_flagged_with_the_exact_text_in_rejects(
    store: EventStore, engine: AsyncEngine
) -> None:
    epoch, _ = await store.claim(SESSION, "owner-1")
    nul = chat_event(
        2,
        type_="session.next.tool.failed",
        kind="tool:error",
        data={"error": {"type": "x\x00y", "message": "bad\x00output"}, "k\x00": 1},
        error_type="x\x00y",
        error_message="bad\x00output",
    )

    result = await store.write_batch(SESSION, epoch, [*batch(1), nul, *batch(3)], RECEIVED_AT)

    assert result == BatchResult(inserted=3, duplicates=0, rejected=0, cursor_seq=3)
    rows = {r["seq"]: r for r in await _select_all(engine, chat_session_events)}
    assert [rows[s]["payload_lossy"] for s in (1, 2, 3)] == [False, True, False]
    stored = rows[2]["payload"]
    assert stored["data"]["error"] == {"type": f"x{REPLACEMENT}y", "message": f"bad{REPLACEMENT}output"}
    assert stored["data"][f"k{REPLACEMENT}"] == 1
    assert rows[2]["error_type"] == f"x{REPLACEMENT}y"
    assert rows[2]["error_message"] == f"bad{REPLACEMENT}output"
    [reject] = await _select_all(engine, chat_event_rejects)
    assert (reject["reason"], reject["seq"], reject["event_id"]) == ("lossy_payload", 2, nul.event_id)
    assert json.loads(reject["raw"]) == nul.envelope.raw


async def test_replaying_a_lossy_event_is_a_benign_duplicate(store: EventStore, engine: AsyncEngine) -> None:
    epoch, _ = await store.claim(SESSION, "owner-1")
    nul = chat_event(1, data={"text": "a\x00b"})
    await store.write_batch(SESSION, epoch, [nul], RECEIVED_AT)

    again = await store.write_batch(SESSION, epoch, [nul], RECEIVED_AT)

    assert again == BatchResult(inserted=0, duplicates=1, rejected=0, cursor_seq=1)
    assert len(await _select_all(engine, chat_event_rejects)) == 1


async def test_unstorable_numbers_and_lone_surrogates_do_not_fail_the_batch(
    store: EventStore, engine: AsyncEngine
) -> None:
    epoch, _ = await store.claim(SESSION, "owner-1")
    odd = chat_event(1, data={"nan": float("nan"), "surrogate": "\ud800"}, tokens_input=2**70)

    result = await store.write_batch(SESSION, epoch, [odd], RECEIVED_AT)

    assert result.inserted == 1
    [row] = await _select_all(engine, chat_session_events)
    assert row["payload_lossy"] is True
    assert row["payload"]["data"]["nan"] is None
    assert row["payload"]["data"]["surrogate"] == REPLACEMENT
    assert row["tokens_input"] is None
    [reject] = await _select_all(engine, chat_event_rejects)
    assert reject["raw"].isascii() and "\\ud800" in reject["raw"]
