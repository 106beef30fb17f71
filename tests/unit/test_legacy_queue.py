"""bridge.command_service.legacy_queue: the sender of the bridge's own legacy queue — the oldest waiting prompt
of each session, sent by the lease holder once the legacy turn has ended; a deleted session's are dropped, a
file gone meanwhile is a 422, a session nobody follows is warmed first. It asks the router by its methods."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bridge.command_service.legacy_queue import QueueSender
from bridge.command_service.prompt_router import PromptRouter
from bridge.commands.legacy_delivery import DONE, DROPPED, FAILED, QUEUED, SENDING
from bridge.errors import SessionNotFound
from bridge.store.commands_pending import CommandKey
from bridge.store.memory import MemoryPromptQueue
from tests.support.commands_twin import OTHER, SID, UpstreamCommandsTwin
from tests.support.door_twins import add_prompt, tables_on
from tests.support.serve_model import Clock


class _Serve(UpstreamCommandsTwin):
    def __init__(self) -> None:
        super().__init__()
        self.busy = False
        self.gone: set[str] = set()
        self.sent = asyncio.Event()

    async def legacy_prompt(self, sid: str, directory: str, body: dict[str, Any]) -> int:
        status = await super().legacy_prompt(sid, directory, body)
        self.sent.set()
        return status

    async def legacy_busy(self, sid: str, directory: str) -> bool:
        return self.busy

    async def session(self, sid: str) -> dict[str, Any]:
        if sid in self.gone:
            raise SessionNotFound("GET: HTTP 404", 404)
        return await super().session(sid)


class _Sessions:
    def __init__(self, owned: set[str]) -> None:
        self.owned = owned
        self.warmed: list[tuple[str, str]] = []

    def owns(self, session_id: str) -> bool:
        return session_id in self.owned

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        self.warmed.append((session_id, reason))
        return True


def _sender(owned: set[str] | None = None) -> tuple[QueueSender, MemoryPromptQueue, _Serve, _Sessions]:
    clock, serve = Clock(1000.0), _Serve()
    queue = MemoryPromptQueue(tables_on(clock))
    sessions = _Sessions({SID} if owned is None else owned)
    router = PromptRouter(queue, serve, "legacy", clock=clock)  # type: ignore[arg-type]
    return QueueSender(router, sessions, poll_s=60.0), queue, serve, sessions


def _queued(queue: MemoryPromptQueue, cid: str, sid: str = SID, state: str = QUEUED, **body: Any) -> dict[str, Any]:
    mid = f"msg_0a1b2c3d4e5f{cid:>14}".replace(" ", "A")
    return add_prompt(queue.tables, CommandKey("alice", sid, cid), {"text": "hi", **body}, state=state,
                      upstream_id=mid, result={"command_id": cid, "state": QUEUED})


async def test_the_oldest_waiting_prompt_of_each_session_goes_once_the_turn_ended() -> None:
    sender, queue, serve, _ = _sender({SID, OTHER})
    first, second, other = _queued(queue, "c1"), _queued(queue, "c2"), _queued(queue, "c3", OTHER)
    serve.busy = True
    assert await sender.look() == 0 and first["state"] == QUEUED
    serve.busy = False
    assert await sender.look() == 2
    assert (first["state"], second["state"], other["state"]) == (DONE, QUEUED, DONE)  # FIFO per session
    assert await sender.look() == 1 and second["state"] == DONE
    assert await sender.look() == 0 and serve.count("legacy_prompt") == 3


async def test_a_session_nobody_follows_is_warmed_first() -> None:
    sender, queue, _, sessions = _sender(owned=set())
    row = _queued(queue, "c1")
    assert await sender.look() == 0
    assert sessions.warmed == [(SID, "queued prompt")] and row["state"] == QUEUED
    sessions.owned.add(SID)
    assert await sender.look() == 1 and row["state"] == DONE


async def test_a_deleted_sessions_prompts_are_dropped_never_sent() -> None:
    sender, queue, serve, _ = _sender()
    sending, waiting = _queued(queue, "c1", state=SENDING), _queued(queue, "c2")
    queue.tables.put(SID, deleted=True)
    assert await sender.look() == 0
    assert (sending["state"], sending["http_status"]) == (FAILED, 404)  # its send may have happened: final
    assert waiting["state"] == DROPPED and serve.count("legacy_prompt") == 0
    sender2, queue2, serve2, _ = _sender()
    row = _queued(queue2, "c1")
    serve2.gone.add(SID)  # the serve has it no more, the mirror has not heard yet
    assert await sender2.look() == 0 and row["state"] == DROPPED


async def test_a_file_gone_while_the_prompt_waited_is_refused_nothing_sent(tmp_path: Path) -> None:
    sender, queue, serve, _ = _sender()
    row = _queued(queue, "c1", files=[{"path": "gone.txt", "mime": "text/plain"}])
    assert await sender.look() == 0
    assert (row["state"], row["http_status"]) == (FAILED, 422) and row["result"] is not None
    assert row["result"]["error"]["code"] == "bad_file" and serve.count("legacy_prompt") == 0


async def test_run_looks_when_woken() -> None:
    sender, queue, serve, _ = _sender()
    task = asyncio.create_task(sender.run())
    try:
        await asyncio.sleep(0)  # the first wait has begun (poll 60 s)
        _queued(queue, "c1")
        sender.wake(SID)  # a session of ours went idle upstream: looked at now, not in 60 s
        async with asyncio.timeout(5):
            await serve.sent.wait()
    finally:
        task.cancel()
    assert serve.count("legacy_prompt") == 1
