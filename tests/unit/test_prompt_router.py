"""bridge.command_service.prompt_router: a prompt's way upstream — the runtime that holds the session's
conversation, the attachments checked on the disk, on the legacy runtime a send now or the bridge's own
queue; and the small method API the queue's sender uses (wake, woken, waiting, settle, send_queued)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.command_service.prompt_router import VERSION_TTL_S, PromptRouter, newest_message
from bridge.commands.affinity import BASIS_HISTORY, BASIS_NEW
from bridge.commands.legacy_delivery import DONE, FAILED, PENDING, QUEUED
from bridge.commands.model import CommandError, parse_command
from bridge.store.commands_pending import CommandKey
from bridge.store.memory import MemoryPromptQueue
from tests.support.commands_twin import DIR, SID, UpstreamCommandsTwin
from tests.support.door_twins import add_prompt, announced, tables_on, turns
from tests.support.serve_model import Clock

MID = "msg_0a1b2c3d4e5fAAAAAAAAAAAAAA"


class _Serve(UpstreamCommandsTwin):
    def __init__(self) -> None:
        super().__init__()
        self.busy = False
        self.versions = 0

    async def legacy_busy(self, sid: str, directory: str) -> bool:
        return self.busy

    async def serve_version(self) -> str | None:
        self.versions += 1
        return "1.18.33"


def _router(setting: str = "auto") -> tuple[PromptRouter, MemoryPromptQueue, _Serve, Clock]:
    clock, serve = Clock(1000.0), _Serve()
    queue = MemoryPromptQueue(tables_on(clock))
    return PromptRouter(queue, serve, setting, clock=clock), queue, serve, clock  # type: ignore[arg-type]


def _prompt(delivery: str = "steer", cid: str = "c1", **more: Any) -> Any:
    return parse_command("prompt", {"command_id": cid, "text": "hi", "delivery": delivery, **more}, SID)


def _row(queue: MemoryPromptQueue, cmd: Any) -> CommandKey:
    key = CommandKey.of(cmd, "alice")
    add_prompt(queue.tables, key, dict(cmd.args), upstream_id=MID)
    return key


async def test_the_runtime_follows_the_sessions_turns_else_the_serves_own_clients() -> None:
    router, queue, serve, clock = _router()
    choice = await router.choose(SID)
    assert (choice.runtime, choice.basis) == ("legacy", BASIS_NEW)  # a 1.x serve's own clients are legacy
    await router.choose(SID)
    assert serve.versions == 1  # the version is kept
    clock.now += VERSION_TTL_S
    await router.choose(SID)
    assert serve.versions == 2
    turns(queue.tables, SID, "session.next.prompt")
    assert (await router.choose(SID)).basis == BASIS_HISTORY
    assert (await router.choose(SID)).runtime == "v2"
    forced, _, _, _ = _router("v2")
    assert (await forced.choose(SID)).runtime == "v2"


async def test_prepare_refuses_a_file_outside_the_directory_before_anything_moves(tmp_path: Path) -> None:
    router, queue, _, _ = _router()
    cmd = _prompt(files=[{"path": "../x.txt", "mime": "text/plain"}])
    key = _row(queue, cmd)
    with pytest.raises(CommandError) as e:
        await router.prepare(cmd, key, SID, str(tmp_path))
    assert e.value.code == "bad_file" and queue.tables.commands[key]["runtime"] is None
    plain = _prompt(cid="c2")
    key2 = _row(queue, plain)
    choice, resolved = await router.prepare(plain, key2, SID, str(tmp_path))
    assert resolved == {} and queue.tables.commands[key2]["runtime"] == choice.runtime == "legacy"


async def test_a_legacy_queue_prompt_behind_a_busy_turn_waits_and_wakes_the_sender() -> None:
    router, queue, serve, _ = _router()
    serve.busy = True
    assert await router.woken(0.0) is False
    cmd = _prompt("queue")
    key = _row(queue, cmd)
    choice = await router.choose(SID)
    status, body = await router.legacy(cmd, key, SID, DIR, {}, MID, choice)
    assert status == 200 and body["state"] == QUEUED and queue.tables.commands[key]["state"] == QUEUED
    assert serve.count("legacy_prompt") == 0 and announced(queue.tables) == [("c1", QUEUED)]
    assert await router.woken(0.0) is True and await router.woken(0.0) is False
    assert [r.command_id for r in await router.waiting()] == ["c1"]


async def test_a_steer_or_an_idle_session_sends_now() -> None:
    router, queue, serve, _ = _router()
    for cid, delivery in (("c1", "steer"), ("c2", "queue")):
        cmd = _prompt(delivery, cid)
        key = _row(queue, cmd)
        queue.tables.commands[key]["upstream_id"] = f"msg_0a1b2c3d4e5f{cid}AAAAAAAAAAAA"
        status, body = await router.legacy(cmd, key, SID, DIR, {}, str(queue.tables.commands[key]["upstream_id"]),
                                           await router.choose(SID))
        assert (status, body["state"], queue.tables.commands[key]["state"]) == (200, "sent", DONE)
    assert serve.count("legacy_prompt") == 2


async def test_the_senders_methods_settle_deliver_and_drop() -> None:
    router, queue, _, _ = _router()
    key = _row(queue, _prompt("queue"))
    row = queue.tables.commands[key]
    row.update(state=QUEUED, result={"command_id": "c1", "state": QUEUED})
    (head,) = await router.waiting()
    status, answer = await router.send_queued(head, DIR, {"messageID": MID, "parts": []})
    assert (status, answer["state"], row["state"]) == (200, "sent", DONE)
    key2 = _row(queue, _prompt("queue", "c2"))
    queue.tables.commands[key2]["state"] = QUEUED
    (head2,) = await router.waiting()
    assert await router.settle(head2, QUEUED, 422, {"error": "gone"}) is True
    assert (queue.tables.commands[key2]["state"], queue.tables.commands[key2]["http_status"]) == (FAILED, 422)
    assert await router.settle(head2, QUEUED, 422, {}) is False  # final already
    key3 = _row(queue, _prompt("queue", "c3"))
    queue.tables.commands[key3]["state"] = QUEUED
    assert await router.drop_queued(SID, "interrupt") == ["c3"]
    queue.tables.put(SID, deleted=True)
    assert await router.session_deleted(SID) is True
    assert (await router.session_info(SID))["location"] == {"directory": DIR}
    assert queue.tables.commands[_row(queue, _prompt(cid="c4"))]["state"] == PENDING


def test_v2_text_files_go_in_the_text_images_as_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    cmd = _prompt(files=[{"path": "a.txt", "mime": "text/plain"}])
    text, files = PromptRouter.v2_prompt(cmd, {"a.txt": str(tmp_path / "a.txt")})
    assert "hello" in text and files is None
    assert PromptRouter.v2_prompt(_prompt(), {}) == ("hi", None)


def test_the_newest_legacy_message_as_the_queue_sees_it() -> None:
    assert newest_message(None) is None
    done = newest_message({"role": "assistant", "time": {"created": 1, "completed": 2}})
    assert done is not None and done.completed and done.completed_ms == 2
    waiting = newest_message({"role": "user", "time": {"created": 5}})
    assert waiting is not None and not waiting.completed and waiting.created_ms == 5
