"""Questions and the other things the agent waits for, on the real `opencode serve` 1.18.33 with the mock
provider's `MOCK:question` (the model calls the built-in `question` tool): a WebSocket client sees the
question and the status `waiting`, answers it through the bridge, the turn goes on (the model's next request
carries the answer), and the answer is kept (transcript, replay after a restart); both runtimes; a reject;
a question asked while the bridge was killed; a legacy permission answered while `/global/event` was cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from tests.support.bridge_proc import BridgeProcess
from tests.support.fanout_client import WsClient
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "e2e"
SECRET = "e2e-secret-" + "q" * 40
LABELS = ["Red", "Blue"]



async def started(make: Callable[..., BridgeProcess], **kw: Any) -> BridgeProcess:
    b = make(BRIDGE_AUTH_SECRET=SECRET, **kw)
    b.start()
    await b.wait_ready(60)
    return b


def token(scope: str = "prompt", subject: str = "alice") -> str:
    return mint_token(SECRET, UPSTREAM, None, 600, subject, scope=scope)


async def subscribed(clients: list[WsClient], bridge: BridgeProcess, sid: str) -> WsClient:
    """Subscribed and caught up. An `internal` error is retried, as docs/websocket.md tells clients to: on a
    loaded machine the serve may take longer than the bridge's 5 s to confirm a session it is booting."""
    c = await WsClient.connect(bridge.url, token())
    clients.append(c)

    async def caught_up() -> bool:
        if c.of("caught_up", sid):
            return True
        errors = [m for m in c.of("error", sid) if m["code"] == "internal"]
        if len(errors) > tries[0]:
            tries[0] = len(errors)
            await c.subscribe(sid)
        return False

    tries = [0]
    await c.subscribe(sid)
    await wait_until(caught_up, 60, 0.05, message=f"caught up on {sid}")
    return c


async def command(bridge: BridgeProcess, sid: str, rid: str, action: str, body: dict[str, Any],
                  scope: str = "prompt") -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(
            f"{bridge.url}/v1/sessions/{sid}/questions/{rid}/{action}", json=body,
            headers={"Authorization": "Bearer " + token(scope)}) as r:
        return r.status, await r.json()


async def upstream_questions(serve: OpencodeServe) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = await serve.request("GET", "/question",
                                                    headers={"x-opencode-directory": str(serve.project_dir)})
    return got


@contextlib.asynccontextmanager
async def asked_upstream(serve: OpencodeServe) -> AsyncIterator[dict[str, float]]:
    """When each `question[.v2].asked` reached a reader of the serve's `/global/event` (time.monotonic(),
    by request id): the start of the asked-to-frame latency."""
    seen: dict[str, float] = {}

    async def read() -> None:
        async with aiohttp.ClientSession(headers=serve.auth_headers) as http, \
                http.get(serve.base_url + "/global/event", timeout=aiohttp.ClientTimeout(total=None)) as r:
            async for line in r.content:
                if line.startswith(b"data:") and b'"question.' in line:
                    payload = json.loads(line[5:])["payload"]
                    if payload.get("type") in ("question.asked", "question.v2.asked"):
                        seen[payload["properties"]["id"]] = time.monotonic()

    task = asyncio.create_task(read())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def latency_ms(c: WsClient, frame: dict[str, Any], seen: dict[str, float]) -> float:
    return (c.time_of(frame) - seen[frame["request_id"]]) * 1000


async def transcript(bridge: BridgeProcess, sid: str) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(
            f"{bridge.url}/v1/sessions/{sid}/transcript", headers={"Authorization": "Bearer " + token("read")}) as r:
        assert r.status == 200, await r.text()
        entries: list[dict[str, Any]] = (await r.json())["data"]["entries"]
        return entries


def question_tools(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for e in entries if e.get("type") == "assistant" for p in e.get("parts", [])
            if p.get("type") == "tool" and p.get("tool") == "question"]


# --- legacy: asked, waiting, refused answers, answered, kept ------------------------------------------


async def test_a_legacy_question_waits_is_answered_through_the_bridge_and_kept_across_a_restart(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient],
    db: AsyncEngine,
) -> None:
    bridge = await started(bridge_processes)
    sid = await opencode.create_session()
    c = await subscribed(clients, bridge, sid)
    async with asked_upstream(opencode) as seen:
        await opencode.prompt_async(sid, "MOCK:question pick")  # the web app's legacy prompt
        asked = await c.wait_for("question", 60, session=sid, state="asked")
        await wait_until(lambda: asked["request_id"] in seen, 10, 0.02, message="asked seen upstream")
    print(f"\nquestion.asked upstream -> question frame on the WebSocket (legacy): "
          f"{latency_ms(c, asked, seen):.1f} ms")
    rid = asked["request_id"]
    assert asked["runtime"] == "legacy" and rid.startswith("que_")
    (q,) = asked["questions"]
    assert [o["label"] for o in q["options"]] == LABELS and (q["multiple"], q["custom"]) == (False, True)
    assert asked["call_id"].startswith("call_question_")
    waiting = await c.wait_for("status", 30, session=sid, status="waiting")
    assert waiting["waiting"]["for"] == "question"

    # The old machine cut a waiting legacy turn within its 2 s settle time (the session is never listed
    # by /api/session/active): wait past it, and the session must still be waiting, not interrupted.
    since = c.time_of(waiting)
    await wait_until(lambda: time.monotonic() - since > 5, 10, 0.1, message="5 s of waiting")
    statuses = c.of("status", sid)
    assert [m["status"] for m in statuses[statuses.index(waiting):]] == ["waiting"], statuses

    async def pending_gauge() -> bool:  # refreshed every 15 s (bridge.ops.pending)
        async with aiohttp.ClientSession() as http, http.get(f"{bridge.url}/metrics") as r:
            return 'bridge_pending_requests{kind="question"} 1.0' in await r.text()

    await wait_until(pending_gauge, 40, 0.5, message="the pending-requests gauge counts the question")

    status, body = await command(bridge, sid, rid, "reply", {"command_id": "q-bad", "answers": [["Purple"]]})
    assert (status, body["error"]["code"]) == (400, "bad_request") and "none of the options" in body["error"]["message"]
    status, body = await command(bridge, sid, rid, "reply", {"command_id": "q-read", "answers": [["Red"]]},
                                 scope="read")
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert [x["id"] for x in await upstream_questions(opencode)] == [rid]  # nothing was sent: still pending

    status, body = await command(bridge, sid, rid, "reply", {"command_id": "q-ok", "answers": [["Red"]]})
    assert status == 200, body
    assert (body["runtime"], body["state"], body["applied"], body["answers"]) == ("legacy", "answered", True,
                                                                                  [["Red"]])
    answered = await c.wait_for("question", 30, session=sid, state="answered")
    assert answered["answers"] == [["Red"]]
    await c.wait_for("status", 30, session=sid, status="running")
    after = await mock_llm.wait_for_request("question", 1)  # the model saw the answer
    assert any("Red" in r for r in after.tool_results), after.tool_results
    await opencode.wait_legacy_idle(sid, 1)
    await c.wait_for("status", 30, session=sid, status="idle")

    (tool,) = question_tools(await transcript(bridge, sid))
    assert "Red" in tool["output_text"] and tool["question"]["answers"] == [["Red"]]
    assert tool["question"]["answered_by"] == "alice"
    async with db.connect() as conn:
        row = (await conn.execute(text("SELECT kind, runtime, reply, answer, answered_by FROM "
                                       "chat_permission_requests WHERE request_id = :r"), {"r": rid})).one()
    assert tuple(row) == ("question", "legacy", "answered", [["Red"]], "alice")

    status, body = await command(bridge, sid, rid, "reply", {"command_id": "q-ok", "answers": [["Red"]]})
    assert (status, body["applied"]) == (200, True)  # the same command again: the stored result

    bridge.stop()
    bridge = await started(bridge_processes, name="bridge-2")
    later = await subscribed(clients, bridge, sid)
    kept = await later.wait_for("question", 30, session=sid, request_id=rid)
    assert (kept["state"], kept["answers"], kept["answered_by"]) == ("answered", [["Red"]], "alice")
    assert [o["label"] for o in kept["questions"][0]["options"]] == LABELS


# --- v2: answered over the WebSocket, then a reject --------------------------------------------------------


async def test_a_v2_question_is_answered_over_the_websocket_and_the_next_one_rejected(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient],
) -> None:
    bridge = await started(bridge_processes)
    sid = await opencode.create_session()
    c = await subscribed(clients, bridge, sid)
    async with asked_upstream(opencode) as seen:
        await opencode.prompt(sid, "MOCK:question:multi pick v2")
        asked = await c.wait_for("question", 60, session=sid, state="asked")
        await wait_until(lambda: asked["request_id"] in seen, 10, 0.02, message="asked seen upstream")
    print(f"\nquestion.v2.asked upstream -> question frame on the WebSocket (v2): {latency_ms(c, asked, seen):.1f} ms")
    assert asked["runtime"] == "v2" and asked["questions"][0]["multiple"] is True
    await c.wait_for("status", 30, session=sid, status="waiting")

    await c.send(op="command", id="w1", command="question_reply", session=sid, request_id=asked["request_id"],
                 command_id="v2-ok", answers=[["Blue", {"text": "and green"}]])
    result = await c.wait_for("command_result", 30, id="w1")
    assert result["status"] == 200 and result["result"]["runtime"] == "v2", result
    answered = await c.wait_for("question", 30, session=sid, state="answered")
    assert answered["answers"] == [["Blue", "and green"]]
    after = await mock_llm.wait_for_request("question", 1)
    assert any("Blue" in r and "and green" in r for r in after.tool_results), after.tool_results
    await opencode.wait_idle(sid, 60)
    await c.wait_for("status", 30, session=sid, status="idle")

    await opencode.prompt(sid, "MOCK:question again")
    second = await wait_until(lambda: next((m for m in c.of("question", sid)
                                            if m["state"] == "asked" and m["request_id"] != asked["request_id"]),
                                           None), 60, 0.02, message="a second question")
    status, body = await command(bridge, sid, second["request_id"], "reject", {"command_id": "v2-no"})
    assert (status, body["state"], body["runtime"]) == (200, "rejected", "v2"), body
    await c.wait_for("question", 30, session=sid, request_id=second["request_id"], state="rejected")
    # A rejected question stops the turn upstream without a step end (docs/upstream.md §18).
    await opencode.wait_idle(sid, 60, require_step_end=False)
    await wait_until(lambda: c.of("status", sid)[-1]["status"] == "idle", 30, 0.05, message="idle again")
    # Only the answered question's turn went on to a second model request; the rejected one stopped.
    assert [r.user_text for r in mock_llm.requests_for("question", 1)] == ["MOCK:question:multi pick v2"]
    statuses = [m["status"] for m in c.of("status", sid)]
    assert statuses[-1] == "idle" and statuses.count("waiting") == 2 and "interrupted" not in statuses


# --- asked while the bridge was down -----------------------------------------------------------------------


async def test_a_question_asked_while_the_bridge_was_killed_is_shown_after_the_restart(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient],
) -> None:
    bridge = await started(bridge_processes)
    sid = await opencode.create_session()
    await subscribed(clients, bridge, sid)
    bridge.kill()  # SIGKILL
    await opencode.prompt_async(sid, "MOCK:question while away")
    (pending,) = await wait_until(lambda: _pending(opencode), 60, 0.1, message="asked upstream")

    bridge = await started(bridge_processes, name="bridge-2")
    c = await subscribed(clients, bridge, sid)
    shown = await c.wait_for("question", 30, session=sid, request_id=pending["id"])
    assert shown["state"] == "asked" and shown["runtime"] == "legacy"
    assert [o["label"] for o in shown["questions"][0]["options"]] == LABELS
    # Already waiting when this client subscribed (then only in `subscribed`), or a `status` frame after it.
    await c.wait_status(sid, "waiting", 30)
    status, body = await command(bridge, sid, pending["id"], "reply", {"command_id": "away", "answers": [["Blue"]]})
    assert status == 200, body
    after = await mock_llm.wait_for_request("question", 1)
    assert any("Blue" in r for r in after.tool_results)
    await opencode.wait_legacy_idle(sid, 1)


async def _pending(serve: OpencodeServe) -> list[dict[str, Any]] | None:
    got = await upstream_questions(serve)
    return got or None


# --- a legacy permission answered while /global/event was cut -------------------------------------------


async def test_a_legacy_permission_answered_while_the_live_stream_was_cut_is_no_longer_pending(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient], db: AsyncEngine,
) -> None:
    proxy = TcpProxy("127.0.0.1", opencode.port)
    await proxy.start()
    try:
        bridge = await started(bridge_processes, upstream_url=proxy.url)
        sid = await opencode.create_session()
        c = await subscribed(clients, bridge, sid)
        await opencode.prompt_async(sid, "MOCK:perm go")
        asked = await c.wait_for("permission", 60, session=sid, state="asked")
        assert asked["runtime"] == "legacy"
        await c.wait_for("status", 30, session=sid, status="waiting")

        proxy.block(b"GET /global/event")  # the reply event is lost
        where = {"x-opencode-directory": str(opencode.project_dir)}
        await opencode.request("POST", f"/permission/{asked['request_id']}/reply", json_body={"reply": "once"},
                               headers=where)
        await wait_until(lambda: (opencode.project_dir / "perm-test.txt").exists(), 30, 0.1, message="tool ran")
        assert not c.of("permission", sid)[1:]  # nothing seen while cut
        proxy.unblock(b"GET /global/event")

        replied = await c.wait_for("permission", 60, session=sid, state="replied")
        assert (replied["request_id"], replied["reply"], replied["runtime"]) == (
            asked["request_id"], "unknown", "legacy")
        async with db.connect() as conn:
            pending = (await conn.execute(text("SELECT count(*) FROM chat_permission_requests "
                                               "WHERE session_id = :s AND reply IS NULL"), {"s": sid})).scalar()
        assert pending == 0
        await c.wait_for("status", 60, session=sid, status="idle")
    finally:
        await proxy.stop()
