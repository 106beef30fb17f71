"""Commands through a real bridge process on the real `opencode serve` 1.18.33 with the mock provider
(docs/commands.md): prompts (idle, steer, queue), interrupts, model switches, permission replies of both
runtimes, exactly-once across retries and a crash in the worst place, and the token scopes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from bridge.command_service import EXIT_AFTER_UPSTREAM_ENV
from tests.support.bridge_proc import BridgeFactory, BridgeProcess
from tests.support.fanout_client import WsClient
from tests.support.mock_llm import HELLO_TEXT, MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "e2e-commands"
SECRET = "e2e-commands-secret-" + "x" * 40
ADMITTED = "session.next.prompt.admitted"
PROMPTED = "session.next.prompted"


def token(scope: str = "prompt", sessions: list[str] | None = None, subject: str = "web") -> str:
    return mint_token(SECRET, UPSTREAM, sessions, 600, subject, scope=scope)


class Bridge:
    def __init__(self, proc: BridgeProcess, http: aiohttp.ClientSession) -> None:
        self.proc, self.http = proc, http

    async def post(self, path: str, body: dict[str, Any], tok: str | None = None) -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {tok or token('control')}"}
        async with self.http.post(self.proc.url + path, json=body, headers=headers) as r:
            return r.status, await r.json()

    async def create(self, serve: OpencodeServe, command_id: str = "create-1") -> str:
        status, body = await self.post("/v1/sessions", {"command_id": command_id,
                                                        "directory": str(serve.project_dir)})
        assert status == 201, body
        return str(body["session_id"])

    async def prompt(self, sid: str, command_id: str, text_: str, delivery: str,
                     tok: str | None = None) -> tuple[int, dict[str, Any]]:
        return await self.post(f"/v1/sessions/{sid}/prompt",
                               {"command_id": command_id, "text": text_, "delivery": delivery}, tok or token())


@pytest.fixture
async def bridge_factory(bridge_processes: BridgeFactory, opencode: OpencodeServe
                         ) -> AsyncIterator[Callable[..., Any]]:
    """Started bridges with an HTTP session (the processes are `bridge_processes`, tests/e2e/conftest.py)."""
    http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))

    async def make(name: str = "bridge", **env: str) -> Bridge:
        # v2 unless a test asks otherwise: these tests read the v2 admissions (docs/commands.md, "Runtime
        # affinity"; tests/e2e/test_continuity.py covers the legacy runtime)
        proc = bridge_processes(name, **{"BRIDGE_UPSTREAM_NAME": UPSTREAM, "BRIDGE_AUTH_SECRET": SECRET,
                                         "BRIDGE_ALLOWED_DIRECTORIES": str(opencode.project_dir),
                                         "BRIDGE_PROMPT_RUNTIME": "v2", **env})
        proc.start()
        await proc.wait_ready(60)
        return Bridge(proc, http)

    yield make
    await http.close()


@pytest.fixture
async def bridge(bridge_factory: Callable[..., Any]) -> Bridge:
    b: Bridge = await bridge_factory()
    return b


def of_type(history: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in history if e["type"] == type_]


def seq(e: dict[str, Any]) -> int:
    return int(e["durable"]["seq"])


async def wait_event(serve: OpencodeServe, sid: str, type_: str, timeout: float = 30,
                     **data: Any) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        for e in await serve.history(sid):
            if e["type"] == type_ and all(e["data"].get(k) == v for k, v in data.items()):
                return e
        return None

    got: dict[str, Any] = await wait_until(found, timeout, 0.1, message=f"{type_} {data} in {sid}")
    return got


async def test_prompt_on_an_idle_session_is_admitted_once_and_audited(
    opencode: OpencodeServe, bridge: Bridge, db: AsyncEngine
) -> None:
    sid = await bridge.create(opencode)
    status, body = await bridge.prompt(sid, "p-1", "MOCK:text hello", "queue")
    assert status == 200, body
    history = await opencode.wait_idle(sid, 60)
    admitted = of_type(history, ADMITTED)
    assert [(e["data"]["messageID"], seq(e)) for e in admitted] == [(body["message_id"], body["admitted_seq"])]
    assert [e["data"]["text"] for e in of_type(history, "session.next.text.ended")] == [HELLO_TEXT]
    async with db.connect() as conn:
        rows = (await conn.execute(text("SELECT command, subject, scope, state, admitted_seq FROM chat_commands "
                                        "ORDER BY created_at"))).all()
    assert [tuple(r) for r in rows] == [("create_session", "web", "control", "done", None),
                                        ("prompt", "web", "prompt", "done", body["admitted_seq"])]

    async def asked_by() -> list[Any]:  # the mirrored transcript says who asked for the turn
        async with bridge.http.get(f"{bridge.proc.url}/v1/sessions/{sid}/transcript",
                                   headers={"Authorization": f"Bearer {token('read')}"}) as r:
            if r.status != 200:
                return []
            entries = (await r.json())["data"]["entries"]
        return [(e["message_id"], e.get("asked_by")) for e in entries if e["type"] == "user"]

    assert await wait_until(asked_by, 30, 0.2, message="prompt mirrored") == [(body["message_id"], "web")]


async def test_steer_joins_at_the_step_boundary_and_queue_waits_for_the_turn(
    opencode: OpencodeServe, bridge: Bridge
) -> None:
    sid = await bridge.create(opencode)
    assert (await bridge.prompt(sid, "t-1", "MOCK:slowtool:2 work", "queue"))[0] == 200
    await wait_event(opencode, sid, "session.next.tool.called")
    status, steer = await bridge.prompt(sid, "t-2", "MOCK:text steered", "steer")
    assert status == 200
    status, queued = await bridge.prompt(sid, "t-3", "MOCK:text queued", "queue")
    assert status == 200
    await wait_event(opencode, sid, PROMPTED, 60, messageID=queued["message_id"])
    history = await opencode.wait_idle(sid, 60)
    ended = of_type(history, "session.next.step.ended")
    tool_end = next(seq(e) for e in ended if e["data"].get("finish") == "tool-calls")
    prompted = {e["data"]["messageID"]: seq(e) for e in of_type(history, PROMPTED)}
    # steer: taken once the running tool step ended, inside the same turn (docs/upstream.md §4.1)
    assert tool_end < prompted[steer["message_id"]]
    # queue: only after the steered step has ended too
    steered_end = min(seq(e) for e in ended if seq(e) > prompted[steer["message_id"]])
    assert steered_end < prompted[queued["message_id"]]


async def test_interrupt_during_text_and_during_a_tool_keeps_the_session_usable(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge: Bridge
) -> None:
    sid = await bridge.create(opencode)
    assert (await bridge.prompt(sid, "i-1", "MOCK:gate:g1:2 talk", "queue"))[0] == 200
    await mock_llm.wait_gate_reached("g1", timeout=30)
    await wait_event(opencode, sid, "session.next.text.started")
    status, body = await bridge.post(f"/v1/sessions/{sid}/interrupt", {"command_id": "i-2"})
    assert (status, body["legacy_aborted"]) == (200, False)
    failed = await wait_event(opencode, sid, "session.next.step.failed")
    assert failed["data"]["error"]["message"] == "Provider turn interrupted"
    mock_llm.release("g1")

    assert (await bridge.prompt(sid, "i-3", "MOCK:slowtool:30 work", "queue"))[0] == 200
    await wait_event(opencode, sid, "session.next.tool.called")
    assert (await bridge.post(f"/v1/sessions/{sid}/interrupt", {"command_id": "i-4"}))[0] == 200
    tool_failed = await wait_event(opencode, sid, "session.next.tool.failed")
    assert tool_failed["data"]["error"]["message"] == "Tool execution interrupted"

    status, after = await bridge.prompt(sid, "i-5", "MOCK:text again", "queue")
    assert status == 200
    history = await opencode.wait_idle(sid, 60)
    assert of_type(history, "session.next.text.ended")[-1]["data"]["text"] == HELLO_TEXT
    assert of_type(history, ADMITTED)[-1]["data"]["messageID"] == after["message_id"]


async def test_model_switch_then_prompt_and_a_model_without_credentials_sends_nothing(
    opencode: OpencodeServe, bridge: Bridge
) -> None:
    sid = await bridge.create(opencode)
    path = f"/v1/sessions/{sid}/model"
    status, _ = await bridge.post(path, {"command_id": "m-1", "provider_id": "mock", "model_id": "mock-1"})
    assert status == 200
    await wait_event(opencode, sid, "session.next.model.switched")
    assert (await bridge.prompt(sid, "m-2", "MOCK:text on mock", "queue"))[0] == 200
    history = await opencode.wait_idle(sid, 60)
    model = of_type(history, "session.next.step.started")[-1]["data"]["model"]
    assert (model["providerID"], model["id"]) == ("mock", "mock-1")
    status, _ = await bridge.post(path, {"command_id": "m-3", "provider_id": "anthropic",
                                         "model_id": "claude-sonnet-4-5"})
    assert status == 200
    status, body = await bridge.prompt(sid, "m-4", "MOCK:text nowhere", "queue")
    assert (status, body["error"]["code"]) == (422, "model_unavailable")
    assert len(of_type(await opencode.history(sid), ADMITTED)) == 1  # nothing sent


async def test_a_permission_answered_through_the_bridge_lets_the_tool_run(
    opencode: OpencodeServe, bridge: Bridge
) -> None:
    sid = await bridge.create(opencode)
    assert (await bridge.prompt(sid, "k-1", "MOCK:perm go", "queue"))[0] == 200

    async def pending() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = (await opencode.request("GET", f"/api/session/{sid}/permission"))["data"]
        return got

    request = (await wait_until(pending, 30, 0.1, message="permission asked"))[0]
    status, body = await bridge.post(f"/v1/sessions/{sid}/permissions/{request['id']}/reply",
                                     {"command_id": "k-2", "reply": "once"}, token())
    assert (status, body["runtime"], body["applied"]) == (200, "v2", True)
    success = await wait_event(opencode, sid, "session.next.tool.success")
    assert success["data"]["callID"] == request["source"]["callID"]
    assert (opencode.project_dir / "perm-test.txt").exists()

    async def audited() -> list[Any]:  # the tool-call audit says who asked for the turn
        async with bridge.http.get(f"{bridge.proc.url}/v1/audit/tool-calls", params={"session": sid},
                                   headers={"Authorization": f"Bearer {token('read')}"}) as r:
            rows = (await r.json())["data"] if r.status == 200 else []
        return [(c["call_id"], c["outcome"], c["asked_by"]) for c in rows if c["outcome"] == "success"]

    got = await wait_until(audited, 30, 0.2, message="tool call mirrored")
    assert got == [(request["source"]["callID"], "success", "web")]


async def test_the_same_command_id_twice_and_after_a_crash_admits_once(
    opencode: OpencodeServe, bridge_factory: Callable[..., Any], db: AsyncEngine
) -> None:
    first: Bridge = await bridge_factory("first", **{EXIT_AFTER_UPSTREAM_ENV: "x-crash"})
    sid = await first.create(opencode)
    s1, b1 = await first.prompt(sid, "x-1", "MOCK:text once", "queue")
    s2, b2 = await first.prompt(sid, "x-1", "MOCK:text once", "queue")
    assert s1 == s2 == 200 and b1 == b2
    s3, b3 = await first.prompt(sid, "x-1", "MOCK:text other", "queue")
    assert (s3, b3["error"]["code"]) == (409, "conflict")
    await opencode.wait_idle(sid, 60)

    # The test hook exits the process after the upstream admitted x-crash, before the commit.
    with pytest.raises(aiohttp.ClientError):
        await first.prompt(sid, "x-crash", "MOCK:text crash", "queue")
    assert first.proc.wait() == 99
    async with db.connect() as conn:
        state = (await conn.execute(text("SELECT state FROM chat_commands WHERE command_id = 'x-crash'"))).scalar()
    assert state == "pending"
    second: Bridge = await bridge_factory("second")
    s4, b4 = await second.prompt(sid, "x-crash", "MOCK:text crash", "queue")
    assert s4 == 200
    history = await opencode.wait_idle(sid, 60)
    admitted = [e["data"]["messageID"] for e in of_type(history, ADMITTED)]
    assert admitted == [b1["message_id"], b4["message_id"]]  # one each: the crash did not admit twice


async def test_read_tokens_and_tokens_for_other_sessions_are_refused_every_command(
    opencode: OpencodeServe, bridge: Bridge
) -> None:
    sid = await bridge.create(opencode)
    other = await bridge.create(opencode, "create-other")
    bodies = {
        f"/v1/sessions/{sid}/prompt": {"command_id": "r-1", "text": "MOCK:text", "delivery": "queue"},
        f"/v1/sessions/{sid}/interrupt": {"command_id": "r-2"},
        f"/v1/sessions/{sid}/model": {"command_id": "r-3", "provider_id": "mock", "model_id": "mock-1"},
        f"/v1/sessions/{sid}/agent": {"command_id": "r-4", "agent": "plan"},
        f"/v1/sessions/{sid}/permissions/per_x/reply": {"command_id": "r-5", "reply": "once"},
        "/v1/sessions": {"command_id": "r-6", "directory": str(opencode.project_dir)},
    }
    for tok in (token("read"), token("control", [other])):
        for path, body in bodies.items():
            status, got = await bridge.post(path, body, tok)
            assert (status, got["error"]["code"]) == (403, "forbidden"), path
    assert of_type(await opencode.history(sid), ADMITTED) == []


async def test_a_legacy_turn_is_interrupted_and_its_permission_answered(
    opencode: OpencodeServe, bridge: Bridge
) -> None:
    sid = await bridge.create(opencode)
    where = {"x-opencode-directory": str(opencode.project_dir)}

    async def legacy_prompt(text_: str) -> None:
        await opencode.request("POST", f"/session/{sid}/prompt_async", headers=where, expect=(200, 204),
                               json_body={"parts": [{"type": "text", "text": text_}]})

    async def busy() -> bool:
        st = await opencode.request("GET", "/session/status", headers=where)
        return sid in st and st[sid].get("type") != "idle"

    await legacy_prompt("MOCK:slow:200:0.1 talk")
    await wait_until(busy, 30, 0.1, message="legacy turn running")
    status, body = await bridge.post(f"/v1/sessions/{sid}/interrupt", {"command_id": "l-1"})
    assert (status, body["legacy_aborted"]) == (200, True)
    await wait_until(lambda: _not(busy), 30, 0.1, message="legacy turn stopped")

    await legacy_prompt("MOCK:perm go")

    async def asked() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = await opencode.request("GET", "/permission", headers=where)
        return [p for p in got if p.get("sessionID") == sid]

    request = (await wait_until(asked, 30, 0.1, message="legacy permission asked"))[0]
    status, body = await bridge.post(f"/v1/sessions/{sid}/permissions/{request['id']}/reply",
                                     {"command_id": "l-2", "reply": "once"}, token())
    assert (status, body["runtime"]) == (200, "legacy")
    await wait_until(lambda: (opencode.project_dir / "perm-test.txt").exists(), 30, 0.1, message="tool ran")


async def _not(pred: Callable[[], Any]) -> bool:
    return not await pred()


async def test_the_websocket_command_op_answers_with_a_command_result(
    opencode: OpencodeServe, bridge: Bridge
) -> None:
    sid = await bridge.create(opencode)
    reader = await WsClient.connect(bridge.proc.url, token("read"))
    writer = await WsClient.connect(bridge.proc.url, token("prompt", [sid]))
    try:
        assert (await reader.wait_for("hello"))["scope"] == "read"
        assert (await writer.wait_for("hello"))["scope"] == "prompt"
        frame = {"op": "command", "command": "prompt", "session": sid, "command_id": "w-1",
                 "text": "MOCK:text via ws", "delivery": "queue"}
        await reader.send(**frame, id="r")
        refused = await reader.wait_for("command_result", id="r")
        assert (refused["status"], refused["error"]["code"]) == (403, "forbidden")
        await writer.send(**frame, id=7)
        done = await writer.wait_for("command_result", id=7)
        assert done["status"] == 200 and done["command"] == "prompt"
        history = await opencode.wait_idle(sid, 60)
        assert [e["data"]["messageID"] for e in of_type(history, ADMITTED)] == [done["result"]["message_id"]]
        await writer.send(**{**frame, "delivery": None}, id=8)  # no implicit steer on the socket either
        assert (await writer.wait_for("command_result", id=8))["status"] == 400
    finally:
        await reader.close()
        await writer.close()


async def test_a_session_outside_the_allowed_directories_never_reaches_the_serve(
    opencode: OpencodeServe, bridge: Bridge, tmp_path: Path
) -> None:
    """docs/security.md, "Directories": the real serve would load opencode.json and .opencode/ from
    whatever directory it is given; the bridge refuses before asking it anything."""
    before = {s["id"] for s in await opencode.list_sessions()}
    evil = tmp_path / "evil"
    (evil / ".opencode").mkdir(parents=True)
    (opencode.project_dir / "escape").symlink_to(evil)
    cases = (("/", 403), (str(evil), 403), (str(opencode.project_dir / "escape"), 403),
             (f"{opencode.project_dir}/../evil", 400), (f"{opencode.project_dir}/a\nb", 400))
    for n, (directory, status) in enumerate(cases):
        got = await bridge.post("/v1/sessions", {"command_id": f"d-{n}", "directory": directory})
        assert (got[0], got[1]["error"]["code"]) == (status, "forbidden" if status == 403 else "bad_request"), directory
        assert "directory" in got[1]["error"]["message"], got
    assert {s["id"] for s in await opencode.list_sessions()} == before
    sid = await bridge.create(opencode, "d-ok")  # the allowed root itself still works
    assert sid not in before
