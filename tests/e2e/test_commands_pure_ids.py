"""A v2 prompt's message id is a pure function of the command (docs/commands.md, "Exactly once"), checked on
the real `opencode serve` 1.18.33: an id that sorts before the session's earlier messages still runs its turn
after them with the whole conversation (the v2 runtime orders by admission seq, not by id), and a retry whose
`chat_commands` row was lost — before the mirror re-read the admission — reaches the model once."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.commands.model import v2_prompt_message_id
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe

from .test_commands import ADMITTED, UPSTREAM, Bridge, bridge, bridge_factory, of_type  # noqa: F401

pytestmark = pytest.mark.e2e


def command_id_sorting_before(sid: str, first: str) -> str:
    """A command id whose derived v2 id sorts before `first`'s (the subject is the tokens' `web`)."""
    mine = v2_prompt_message_id(UPSTREAM, sid, first, "web")
    return next(c for c in (f"b-{i}" for i in itertools.count())
                if v2_prompt_message_id(UPSTREAM, sid, c, "web") < mine)


async def test_an_id_sorting_first_still_runs_after_the_earlier_turn_with_its_memory(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge: Bridge  # noqa: F811
) -> None:
    sid = await bridge.create(opencode)
    status, a = await bridge.prompt(sid, "a-1", "MOCK:text first question", "queue")
    assert status == 200, a
    await opencode.wait_idle(sid, 60)
    later = command_id_sorting_before(sid, "a-1")
    status, b = await bridge.prompt(sid, later, "MOCK:text second question", "queue")
    assert status == 200 and b["message_id"] < a["message_id"], b
    history = await opencode.wait_idle(sid, 60)
    admitted = [(e["data"]["messageID"], e["durable"]["seq"]) for e in of_type(history, ADMITTED)]
    assert [m for m, _ in admitted] == [a["message_id"], b["message_id"]]
    second = [r for r in mock_llm.requests if r.carries("second question")]
    assert len(second) == 1
    texts = second[0].user_texts
    assert [t for t in texts if "question" in t] == ["MOCK:text first question", "MOCK:text second question"]
    assert ("assistant" in second[0].roles) and second[0].outcome == "completed"


async def test_a_retry_after_the_row_and_the_mirror_lost_it_reaches_the_model_once(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge: Bridge, db: AsyncEngine  # noqa: F811
) -> None:
    sid = await bridge.create(opencode)
    status, first = await bridge.prompt(sid, "r-1", "MOCK:text only once please", "queue")
    assert status == 200, first
    await opencode.wait_idle(sid, 60)
    async with db.begin() as conn:  # what a failover to a standby that lacked them loses
        await conn.execute(text("DELETE FROM chat_commands WHERE command = 'prompt'"))
        await conn.execute(text("DELETE FROM chat_session_events WHERE session_id = :s AND kind = 'prompt:admitted'"),
                           {"s": sid})
    status, again = await bridge.prompt(sid, "r-1", "MOCK:text only once please", "queue")
    assert status == 200 and again["message_id"] == first["message_id"], again
    assert again["admitted_seq"] == first["admitted_seq"]  # the serve's first admission, given back
    history = await opencode.wait_idle(sid, 60)
    assert [e["data"]["messageID"] for e in of_type(history, ADMITTED)] == [first["message_id"]]
    assert len([r for r in mock_llm.requests if r.carries("only once please") and r.directive != "title"]) == 1
