"""One conversation, whichever client drives it (docs/commands.md, "Runtime affinity"), on the real
`opencode serve` 1.18.33 with the mock provider: what the MODEL saw (the mock's request log) shows that a
prompt through the bridge carries the turns of OpenCode's own CLI and the other way round; the legacy
queue waits for the running turn, also across a SIGKILL; steer joins at the step boundary; a legacy prompt
is sent once across retries and a crash; attachments reach the model."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.command_service import EXIT_AFTER_UPSTREAM_ENV
from tests.e2e.test_commands import Bridge, bridge_factory, token  # noqa: F401 - the fixture is used
from tests.support.fanout_client import WsClient
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

    async def asked_by() -> list[Any]:  # the transcript says who asked for each turn
        async with bridge.http.get(f"{bridge.proc.url}/v1/sessions/{sid}/transcript",
                                   headers={"Authorization": f"Bearer {token('read')}"}) as r:
            entries = (await r.json())["data"]["entries"] if r.status == 200 else []
        got = [e.get("asked_by") for e in entries if e["type"] == "user"]
        return got if len(got) == 2 else []

    assert await wait_until(asked_by, 30, 0.2, message="both turns in the transcript") == [None, "web"]


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


async def start_slow_tool_turn(bridge: Bridge, mock: MockLLM, sid: str, command_id: str, seconds: int,
                               marker: str = "MARKER-D") -> None:
    """A legacy turn through the bridge whose first step runs `sleep` in bash: a turn with a step boundary."""
    status, body = await bridge.prompt(sid, command_id, f"MOCK:slowtool:{seconds} {marker} work", "steer")
    assert status == 200 and body["runtime"] == "legacy", body
    await request_for(mock, marker)  # the tool step is under way


async def test_queue_on_a_running_legacy_turn_runs_after_its_last_step(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_factory: Callable[..., Any]  # noqa: F811
) -> None:
    bridge: Bridge = await bridge_factory(BRIDGE_PROMPT_RUNTIME="auto")
    sid = await bridge.create(opencode)
    watcher = await WsClient.connect(bridge.proc.url, token("read"))
    try:
        await watcher.subscribe(sid)
        await watcher.wait_for("subscribed", session=sid)
        await start_slow_tool_turn(bridge, mock_llm, sid, "q-0", 3)
        status, queued = await bridge.prompt(sid, "q-1", "MOCK:text MARKER-Q queued", "queue")
        assert (status, queued["state"], queued["runtime"]) == (200, "queued", "legacy"), queued
        await watcher.wait_for("command", session=sid, command_id="q-1", state="queued")
        seen = await request_for(mock_llm, "MARKER-Q")
        await watcher.wait_for("command", session=sid, command_id="q-1", state="sent")
    finally:
        await watcher.close()
    final_of_d = model_requests(mock_llm, "MARKER-D")
    # the running turn's last step ran as its own request, finished before the queued prompt went
    assert [r.step for r in final_of_d] == [0, 1]
    assert final_of_d[1].finished is not None and final_of_d[1].finished <= seen.time
    assert markers(seen) == ["MARKER-D", "MARKER-Q"]
    await opencode.wait_legacy_idle(sid, 2)

    async def listed() -> dict[str, Any]:
        async with bridge.http.get(f"{bridge.proc.url}/v1/sessions/{sid}/commands",
                                   headers={"Authorization": f"Bearer {token('read')}"}) as r:
            return {c["command_id"]: c for c in (await r.json())["data"]}

    row = (await listed())["q-1"]
    assert (row["state"], row["result"]["state"], row["runtime"]) == ("done", "sent", "legacy")
    status, again = await bridge.prompt(sid, "q-1", "MOCK:text MARKER-Q queued", "queue")  # a retry: the answer now
    assert (status, again["state"]) == (200, "sent")
    assert len(model_requests(mock_llm, "MARKER-Q")) == 1
    sent = [json.loads(line) for line in bridge.proc.log_path.read_text().splitlines() if "queued_prompt_sent" in line]
    print(f"\nqueued legacy prompt: turn end → sent {sent[0]['turn_end_to_sent_ms']} ms, "
          f"waited {sent[0]['waited_s']} s in the queue")


async def test_a_queued_prompt_survives_a_sigkill_and_is_sent_once_after_restart(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_factory: Callable[..., Any], db: AsyncEngine  # noqa: F811
) -> None:
    first: Bridge = await bridge_factory("first", BRIDGE_PROMPT_RUNTIME="auto")
    sid = await first.create(opencode)
    await start_slow_tool_turn(first, mock_llm, sid, "k-0", 3)
    status, queued = await first.prompt(sid, "k-1", "MOCK:text MARKER-Q after kill", "queue")
    assert (status, queued["state"]) == (200, "queued"), queued
    first.proc.kill()
    await opencode.wait_legacy_idle(sid, 1)  # the turn ended while no bridge ran
    assert model_requests(mock_llm, "MARKER-Q") == []
    second: Bridge = await bridge_factory("second", BRIDGE_PROMPT_RUNTIME="auto")
    seen = await request_for(mock_llm, "MARKER-Q")
    assert markers(seen) == ["MARKER-D", "MARKER-Q"]
    await opencode.wait_legacy_idle(sid, 2)
    assert len(await legacy_users(opencode, sid)) == 2
    assert len([r for r in model_requests(mock_llm, "MARKER-Q") if r.step == 0]) == 1
    async with db.connect() as c:
        state = (await c.execute(text("select state from chat_commands where command_id = 'k-1'"))).scalar()
    assert state == "done"
    assert second.proc.proc is not None and second.proc.proc.poll() is None


async def test_steer_on_a_running_legacy_turn_joins_at_the_step_boundary(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_factory: Callable[..., Any]  # noqa: F811
) -> None:
    bridge: Bridge = await bridge_factory(BRIDGE_PROMPT_RUNTIME="auto")
    sid = await bridge.create(opencode)
    await start_slow_tool_turn(bridge, mock_llm, sid, "s-0", 3)
    status, steer = await bridge.prompt(sid, "s-1", "MOCK:text MARKER-E steered", "steer")
    assert (status, steer["state"]) == (200, "sent"), steer
    seen = await request_for(mock_llm, "MARKER-E")
    # right after the tool result, in the same turn: D's own final step never ran separately
    assert [role for role, _ in seen.messages][-4:] == ["user", "assistant", "tool", "user"]
    assert markers(seen) == ["MARKER-D", "MARKER-E"]
    await opencode.wait_legacy_idle(sid, 1)
    assert [r.step for r in model_requests(mock_llm, "MARKER-D")] == [0]


async def test_the_same_command_id_twice_and_after_a_crash_gives_one_legacy_message(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_factory: Callable[..., Any], db: AsyncEngine  # noqa: F811
) -> None:
    first: Bridge = await bridge_factory("first", BRIDGE_PROMPT_RUNTIME="auto",
                                         **{EXIT_AFTER_UPSTREAM_ENV: "once-crash"})
    sid = await first.create(opencode)
    s1, b1 = await first.prompt(sid, "once-1", "MOCK:text MARKER-O1", "steer")
    s2, b2 = await first.prompt(sid, "once-1", "MOCK:text MARKER-O1", "steer")
    assert s1 == s2 == 200 and b1 == b2 and b1["runtime"] == "legacy"
    await opencode.wait_legacy_idle(sid, 1)
    with pytest.raises(aiohttp.ClientError):  # the hook exits after prompt_async answered, before the commit
        await first.prompt(sid, "once-crash", "MOCK:text MARKER-O2", "steer")
    assert first.proc.wait() == 99
    async with db.connect() as c:
        state = (await c.execute(text("select state from chat_commands where command_id = 'once-crash'"))).scalar()
    assert state == "sending"
    second: Bridge = await bridge_factory("second", BRIDGE_PROMPT_RUNTIME="auto")
    s3, b3 = await second.prompt(sid, "once-crash", "MOCK:text MARKER-O2", "steer")
    assert (s3, b3["state"]) == (200, "sent"), b3
    await opencode.wait_legacy_idle(sid, 2)
    users = [m for m in await opencode.legacy_messages(sid) if m["info"]["role"] == "user"]
    assert [m["info"]["id"] for m in users] == [b1["message_id"], b3["message_id"]]
    assert [len([p for p in m["parts"] if p["type"] == "text"]) for m in users] == [1, 1]  # no duplicate part
    assert len([r for r in model_requests(mock_llm, "MARKER-O2") if r.step == 0]) == 1


def tiny_png() -> bytes:
    """A valid 2x2 RGB PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


async def test_a_text_file_and_an_image_reach_the_model_and_a_path_outside_is_refused(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_factory: Callable[..., Any], tmp_path: Path  # noqa: F811
) -> None:
    bridge: Bridge = await bridge_factory(BRIDGE_PROMPT_RUNTIME="auto")
    sid = await bridge.create(opencode)
    (opencode.project_dir / "notes.txt").write_text("MARKER-FILE-CONTENT inside\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    (opencode.project_dir / "link-out.txt").symlink_to(tmp_path / "outside.txt")
    png = tiny_png()
    image = {"url": "data:image/png;base64," + base64.b64encode(png).decode(), "mime": "image/png",
             "filename": "dot.png"}
    path = f"/v1/sessions/{sid}/prompt"
    for bad in ("../outside.txt", str(tmp_path / "outside.txt"), "link-out.txt", "missing.txt"):
        status, body = await bridge.post(path, {"command_id": f"att-{bad}", "text": "MOCK:text no", "delivery": "steer",
                                                "files": [{"path": bad, "mime": "text/plain"}]}, token())
        assert (status, body["error"]["code"]) == (422, "bad_file"), bad  # well formed: the disk refuses it
    status, body = await bridge.post(path, {"command_id": "att-1", "text": "MOCK:text MARKER-ATT look",
                                            "delivery": "steer",
                                            "files": [{"path": "notes.txt", "mime": "text/plain"}, image]}, token())
    assert status == 200, body
    seen = await request_for(mock_llm, "MARKER-ATT")
    assert "MARKER-FILE-CONTENT inside" in "\n".join(seen.user_texts)
    assert [i.split(":")[0] for i in seen.images] == ["image/png"]
    assert model_requests(mock_llm, "MOCK:text no") == []


async def test_a_queued_prompt_of_a_deleted_session_is_dropped_and_an_interrupt_keeps_the_queue(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_factory: Callable[..., Any], db: AsyncEngine  # noqa: F811
) -> None:
    bridge: Bridge = await bridge_factory(BRIDGE_PROMPT_RUNTIME="auto")
    sid = await bridge.create(opencode)
    await start_slow_tool_turn(bridge, mock_llm, sid, "d-0", 20)
    assert (await bridge.prompt(sid, "d-1", "MOCK:text MARKER-KEPT", "queue"))[1]["state"] == "queued"
    status, stopped = await bridge.post(f"/v1/sessions/{sid}/interrupt", {"command_id": "d-2"})
    assert (status, stopped["legacy_aborted"]) == (200, True) and "dropped" not in stopped
    seen = await request_for(mock_llm, "MARKER-KEPT")  # kept: it runs after the stopped turn
    assert markers(seen)[-1] == "MARKER-KEPT"
    await opencode.wait_legacy_idle(sid, 2)

    await start_slow_tool_turn(bridge, mock_llm, sid, "d-3", 20, "MARKER-D2")
    assert (await bridge.prompt(sid, "d-4", "MOCK:text MARKER-GONE", "queue"))[1]["state"] == "queued"
    await opencode.delete_session(sid)

    async def state() -> str | None:
        async with db.connect() as c:
            got = (await c.execute(text("select state from chat_commands where command_id = 'd-4'"))).scalar()
        return got if got == "dropped" else None

    await wait_until(state, 60, 0.2, message="the queued prompt of the deleted session dropped")
    assert model_requests(mock_llm, "MARKER-GONE") == []


async def test_attachments_reach_the_model_on_a_v2_session_too(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_factory: Callable[..., Any]  # noqa: F811
) -> None:
    bridge: Bridge = await bridge_factory(BRIDGE_PROMPT_RUNTIME="v2")
    sid = await bridge.create(opencode)
    (opencode.project_dir / "notes.txt").write_text("MARKER-V2-FILE-CONTENT inside\n")
    png = tiny_png()
    image = {"url": "data:image/png;base64," + base64.b64encode(png).decode(), "mime": "image/png",
             "filename": "dot.png"}
    status, body = await bridge.post(f"/v1/sessions/{sid}/prompt", {
        "command_id": "v2att-1", "text": "MOCK:text MARKER-V2ATT look", "delivery": "steer",
        "files": [{"path": "notes.txt", "mime": "text/plain"}, image]}, token())
    assert (status, body.get("runtime")) == (200, "v2"), body
    seen = await request_for(mock_llm, "MARKER-V2ATT")
    assert "MARKER-V2-FILE-CONTENT inside" in "\n".join(text_ for _, text_ in seen.messages)
    assert [i.split(":")[0] for i in seen.images] == ["image/png"]


async def test_a_mixed_history_continues_in_its_latest_turns_runtime_and_says_so(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_factory: Callable[..., Any], db: AsyncEngine  # noqa: F811
) -> None:
    bridge: Bridge = await bridge_factory(BRIDGE_PROMPT_RUNTIME="auto")
    sid = await opencode.create_session()
    await opencode.run_cli(sid, "MOCK:text MARKER-CLI legacy turn")
    await opencode.prompt(sid, "MOCK:text MARKER-V2 v2 turn")  # straight to the serve's v2 API
    await opencode.wait_idle(sid, 60)
    await mirrored_turns(db, sid, 2)
    status, body = await bridge.prompt(sid, "mix-1", "MOCK:text MARKER-MIX third", "steer")
    assert (status, body["runtime"], body["runtime_basis"]) == (200, "v2", "mixed_history"), body
    assert "legacy turns" in body["runtime_note"]
    seen = await request_for(mock_llm, "MARKER-MIX")
    assert markers(seen) == ["MARKER-V2", "MARKER-MIX"]  # the v2 conversation, as the note says
