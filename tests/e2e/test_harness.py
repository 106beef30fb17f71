"""The e2e harness itself, proven against the real ``opencode serve`` 1.18.33 and the mock provider."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.support.mock_llm import FINAL_TEXT, HELLO_TEXT, MockLLM
from tests.support.opencode import OpencodeFactory, OpencodeHTTPError, OpencodeServe
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

NS = "session.next."

Event = dict[str, Any]


def types(events: list[Event]) -> list[str]:
    return [e["type"].removeprefix(NS) for e in events]


def seqs(events: list[Event]) -> list[int]:
    return [int(e["durable"]["seq"]) for e in events]


def of_type(events: list[Event], name: str) -> list[Event]:
    return [e for e in events if e["type"] == NS + name]


async def test_text_turn_reaches_step_ended(opencode: OpencodeServe, mock_llm: MockLLM) -> None:
    sid = await opencode.create_session()
    admitted = await opencode.prompt(sid, "MOCK:text Say hello.")
    assert admitted["admittedSeq"] == 1

    events = await opencode.wait_idle(sid, timeout=30)

    assert types(events) == ["prompt.admitted", "prompted", "step.started", "text.started", "text.ended",
                             "step.ended"]
    assert seqs(events) == [1, 2, 3, 4, 5, 6]
    assert events[0]["data"]["messageID"] == admitted["id"]
    assert of_type(events, "text.ended")[0]["data"]["text"] == HELLO_TEXT
    ended = of_type(events, "step.ended")[0]["data"]
    assert ended["finish"] == "stop"
    assert ended["tokens"]["input"] == 100 and ended["tokens"]["output"] == 10
    [request] = mock_llm.requests_for("text")
    assert (request.step, request.attempt, request.outcome) == (0, 1, "completed")
    assert await opencode.active() == {}


async def test_tool_turn_runs_bash_and_read(opencode: OpencodeServe, mock_llm: MockLLM) -> None:
    sid = await opencode.create_session()
    await opencode.prompt(sid, "MOCK:tool Run echo, then read hello.txt.")

    events = await opencode.wait_idle(sid, timeout=30)

    called = {e["data"]["tool"]: e["data"] for e in of_type(events, "tool.called")}
    assert called["bash"]["input"]["command"] == "echo hi"
    assert called["read"]["input"]["path"] == "hello.txt"
    succeeded = {e["data"]["callID"]: e["data"] for e in of_type(events, "tool.success")}
    assert set(succeeded) == {called["bash"]["callID"], called["read"]["callID"]}
    bash_output = "".join(part["text"] for part in succeeded[called["bash"]["callID"]]["content"])
    assert "hi\n" in bash_output
    assert [e["data"]["finish"] for e in of_type(events, "step.ended")] == ["tool-calls", "tool-calls", "stop"]
    assert of_type(events, "text.ended")[-1]["data"]["text"] == FINAL_TEXT
    assert [r.step for r in mock_llm.requests_for("tool")] == [0, 1, 2]


async def test_gate_holds_the_turn_until_released(opencode: OpencodeServe, mock_llm: MockLLM) -> None:
    sid = await opencode.create_session()
    await opencode.prompt(sid, "MOCK:gate:held Wait for the gate.")
    await mock_llm.wait_gate_reached("held", timeout=20)

    assert sid in await opencode.active()
    # The first chunk has been streamed; the step is open and cannot end while the gate is shut.
    await wait_until(lambda: _has(opencode, sid, "text.started"), 10, message="text.started in history")
    assert not of_type(await opencode.history(sid), "step.ended")

    mock_llm.release("held")
    events = await opencode.wait_idle(sid, timeout=20)

    assert of_type(events, "text.ended")[0]["data"]["text"] == "Gate held chunk 0. Released."
    assert of_type(events, "step.ended")[0]["data"]["finish"] == "stop"
    assert sid not in await opencode.active()


async def test_interrupt_while_gated_fails_the_step(opencode: OpencodeServe, mock_llm: MockLLM) -> None:
    sid = await opencode.create_session()
    await opencode.prompt(sid, "MOCK:gate:never Wait forever.")
    await mock_llm.wait_gate_reached("never", timeout=20)
    # The mock has written its first chunk; the step is open once opencode has committed it.
    await wait_until(lambda: _has(opencode, sid, "text.started"), 10, message="text.started in history")

    await opencode.interrupt(sid)
    events = await opencode.wait_idle(sid, timeout=20)

    assert types(events)[-2:] == ["text.ended", "step.failed"]
    assert of_type(events, "text.ended")[0]["data"]["text"] == "Gate never chunk 0. "
    failed = of_type(events, "step.failed")[0]["data"]
    assert failed["error"] == {"type": "unknown", "message": "Provider turn interrupted"}
    [request] = mock_llm.requests_for("gate")
    await wait_until(lambda: request.outcome == "disconnected", 5, message="mock saw the provider call end")


async def test_interrupt_before_the_first_chunk_leaves_no_step(opencode: OpencodeServe,
                                                               mock_llm: MockLLM) -> None:
    sid = await opencode.create_session()
    await opencode.prompt(sid, "MOCK:gate:early:0 Headers only.")
    await mock_llm.wait_gate_reached("early", timeout=20)
    assert sid in await opencode.active()

    await opencode.interrupt(sid)

    # step.started waits for the provider's first chunk: the turn ends with no step event at all.
    events = await opencode.wait_idle(sid, timeout=20, require_step_end=False)
    assert types(events) == ["prompt.admitted", "prompted"]
    [request] = mock_llm.requests_for("gate")
    await wait_until(lambda: request.outcome == "disconnected", 5, message="mock saw the provider call end")
    # The session is usable afterwards.
    await opencode.prompt(sid, "MOCK:text again")
    events = await opencode.wait_idle(sid, timeout=20)
    assert of_type(events, "step.ended")[-1]["data"]["finish"] == "stop"


async def test_restart_keeps_history_and_seq_continues(opencode: OpencodeServe, mock_llm: MockLLM) -> None:
    sid = await opencode.create_session()
    await opencode.prompt(sid, "MOCK:text before restart")
    before = await opencode.wait_idle(sid, timeout=30)
    old_pid, port = opencode.pid, opencode.port

    await opencode.restart()

    assert opencode.port == port and opencode.pid != old_pid
    assert await opencode.history(sid) == before
    assert await opencode.active() == {}
    assert sid in {s["id"] for s in await opencode.list_sessions()}
    admitted = await opencode.prompt(sid, "MOCK:text after restart")
    assert admitted["admittedSeq"] == seqs(before)[-1] + 1
    after = await opencode.wait_idle(sid, timeout=30)
    assert after[: len(before)] == before
    assert seqs(after) == list(range(1, len(after) + 1))
    assert of_type(after, "step.ended")[-1]["data"]["finish"] == "stop"
    assert len(mock_llm.requests_for("text")) == 2


async def test_kill_mid_turn_leaves_the_step_open(opencode: OpencodeServe, mock_llm: MockLLM) -> None:
    sid = await opencode.create_session()
    await opencode.prompt(sid, "MOCK:gate:killed Never finishes.")
    await mock_llm.wait_gate_reached("killed", timeout=20)
    await wait_until(lambda: _has(opencode, sid, "text.started"), 10, message="text.started in history")

    await opencode.restart(kill=True)

    # Nothing closes the interrupted turn: no step end will ever come, so wait without requiring one.
    events = await opencode.wait_idle(sid, timeout=20, require_step_end=False)
    assert types(events)[-2:] == ["step.started", "text.started"]
    assert await opencode.active() == {}


async def test_list_sessions_follows_every_page(opencode: OpencodeServe) -> None:
    created = [await opencode.create_session() for _ in range(5)]

    paged = await opencode.list_sessions(page_size=2)
    assert [s["id"] for s in paged] == list(reversed(created))  # newest first
    oldest_first = await opencode.list_sessions(page_size=2, order="asc")
    assert [s["id"] for s in oldest_first] == created

    await opencode.delete_session(created[0])
    assert created[0] not in {s["id"] for s in await opencode.list_sessions(page_size=2)}
    with pytest.raises(OpencodeHTTPError) as missing:
        await opencode.get_session(created[0])
    assert missing.value.status == 404


async def test_password_protected_serve(opencode_factory: OpencodeFactory) -> None:
    serve = await opencode_factory(name="secured", password="s3cret")

    assert (await serve.health())["healthy"] is True
    async with aiohttp.ClientSession() as anonymous, anonymous.get(f"{serve.base_url}/api/health") as response:
        assert response.status == 401


async def _has(serve: OpencodeServe, session_id: str, event_type: str) -> bool:
    return bool(of_type(await serve.history(session_id), event_type))
