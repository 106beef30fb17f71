"""One conversation, whichever client drives it (docs/commands.md, "Runtime affinity"), on the real
`opencode serve` 1.18.33 with the mock provider: what the MODEL saw (the mock's request log) shows that a
prompt through the bridge carries the turns of OpenCode's own CLI and the other way round; the legacy
queue waits for the running turn, also across a SIGKILL; steer joins at the step boundary; a legacy prompt
is sent once across retries and a crash; attachments reach the model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.e2e.test_commands import Bridge, bridge_factory, token  # noqa: F401 - the fixture is used
from tests.support.mock_llm import MockLLM, RecordedRequest
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e


async def mirrored_turns(db: AsyncEngine, sid: str, count: int) -> None:
    """Wait until the mirror stored `count` turns (prompts) of the session: the runtime choice reads them."""
    async def stored() -> bool:
        async with db.connect() as c:
            n = (await c.execute(text("select count(*) from chat_session_events where session_id = :s "
                                      "and kind = 'prompt:admitted'"), {"s": sid})).scalar_one()
        return int(n) >= count

    await wait_until(stored, 60, 0.1, message=f"{count} turn(s) of {sid} mirrored")


def model_requests(mock: MockLLM, marker: str) -> list[RecordedRequest]:
    """The model's requests (not title generation) whose newest user message carries `marker`."""
    return [r for r in mock.requests if r.directive != "title" and marker in r.user_text]


async def request_for(mock: MockLLM, marker: str, step: int = 0) -> RecordedRequest:
    found = await wait_until(lambda: [r for r in model_requests(mock, marker) if r.step == step], 60, 0.05,
                             message=f"a model request for {marker!r} step {step}")
    return found[0]


def markers(req: RecordedRequest) -> list[str]:
    """The MARKER-… words of the request's user messages, oldest first (the CLI quotes its text)."""
    return [w.strip('"') for t in req.user_texts for w in t.split() if w.strip('"').startswith("MARKER-")]


async def legacy_users(opencode: OpencodeServe, sid: str) -> list[str]:
    return [m["info"]["id"] for m in await opencode.legacy_messages(sid) if m["info"].get("role") == "user"]


async def test_a_session_begun_with_the_cli_continues_through_the_bridge_with_its_memory(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_factory: Callable[..., Any], db: AsyncEngine  # noqa: F811
) -> None:
    bridge: Bridge = await bridge_factory(BRIDGE_PROMPT_RUNTIME="auto")
    sid = await opencode.create_session()
    await opencode.run_cli(sid, "MOCK:text MARKER-CLI first turn")
    await mirrored_turns(db, sid, 1)
    status, body = await bridge.prompt(sid, "cont-1", "MOCK:text MARKER-BRIDGE second turn", "steer")
    assert status == 200, body
    assert (body["runtime"], body["runtime_basis"], body["state"]) == ("legacy", "history", "sent")
    seen = await request_for(mock_llm, "MARKER-BRIDGE")
    assert markers(seen) == ["MARKER-CLI", "MARKER-BRIDGE"]
    assert [role for role, _ in seen.messages] == ["system", "user", "assistant", "user"]
    async with db.connect() as c:
        row = (await c.execute(text("select runtime, state from chat_commands where command_id = 'cont-1'"))).one()
    assert tuple(row) == ("legacy", "done")


async def test_a_session_begun_through_the_bridge_continues_in_the_cli_with_its_memory(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_factory: Callable[..., Any]  # noqa: F811
) -> None:
    bridge: Bridge = await bridge_factory(BRIDGE_PROMPT_RUNTIME="auto")
    sid = await bridge.create(opencode)
    status, body = await bridge.prompt(sid, "rev-1", "MOCK:text MARKER-BRIDGE first turn", "queue")
    assert status == 200, body
    # no turn yet: the runtime OpenCode's own clients of a 1.x serve use, so that they see this turn
    assert (body["runtime"], body["runtime_basis"], body["state"]) == ("legacy", "no_turn", "sent")
    await opencode.wait_legacy_idle(sid, 1)
    await opencode.run_cli(sid, "MOCK:text MARKER-CLI second turn")
    seen = await request_for(mock_llm, "MARKER-CLI")
    assert markers(seen) == ["MARKER-BRIDGE", "MARKER-CLI"]
