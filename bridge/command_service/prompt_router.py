"""A prompt's way upstream (docs/commands.md, "Runtime affinity"): the runtime that holds the session's
conversation (bridge.commands.affinity, from the mirror's turns and the serve's version), the
attachments checked on the disk, and on the legacy runtime either an immediate send or the bridge's own
queue (bridge.commands.legacy_delivery, bridge.command_service.legacy_queue)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from bridge import metrics
from bridge.command_service.attachment_files import resolve_paths, text_contents
from bridge.command_service.legacy_prompts import LegacyPrompts, legacy_body, prompt_result
from bridge.commands.affinity import RuntimeChoice, choose_runtime
from bridge.commands.attachments import AttachmentError, v2_files, v2_text
from bridge.commands.legacy_delivery import FAILED, PENDING, QUEUED, NewestMessage, first_state, turn_ended
from bridge.commands.model import Command, CommandError
from bridge.errors import UpstreamError
from bridge.store.ports.commands import CommandKey
from bridge.store.ports.prompt_queue import PromptQueuePort, PromptRow
from bridge.upstream.commands import UpstreamCommands

VERSION_TTL_S = 300.0


def newest_message(info: Mapping[str, Any] | None) -> NewestMessage | None:
    """A legacy message `info` as the queue's view of it."""
    if info is None:
        return None
    t = info.get("time")
    t = t if isinstance(t, dict) else {}
    created, done = t.get("created"), t.get("completed")
    completed = info.get("role") == "assistant" and (done is not None or info.get("error") is not None)
    return NewestMessage(str(info.get("role")), completed, created if isinstance(created, int) else None,
                         done if isinstance(done, int) else None)


class PromptRouter:
    def __init__(self, queue: PromptQueuePort, upstream: UpstreamCommands, setting: str, *,
                 exit_after: str | None = None, clock: Callable[[], float] = time.monotonic,
                 now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.queue = queue
        self.upstream = upstream
        self.setting = setting
        self.legacy_sender = LegacyPrompts(queue, upstream, exit_after=exit_after, clock=clock)
        self._woken = asyncio.Event()  # a prompt was queued, a session went idle: the queue's sender looks
        self._clock = clock
        self._now_ms = now_ms
        self._version: tuple[float, str | None] | None = None

    async def serve_version(self) -> str | None:
        """The serve's version (`GET /global/health`), kept VERSION_TTL_S; None when it does not say."""
        if self._version is None or self._version[0] <= self._clock():
            try:
                version = await self.upstream.serve_version()
            except UpstreamError:
                version = None
            self._version = (self._clock() + VERSION_TTL_S, version)
        return self._version[1]

    async def choose(self, session_id: str) -> RuntimeChoice:
        history = await self.queue.turn_history(session_id)
        version = await self.serve_version() if history.latest is None and self.setting == "auto" else None
        return choose_runtime(history, self.setting, version)

    async def prepare(self, cmd: Command, key: CommandKey, sid: str,
                      directory: str) -> tuple[RuntimeChoice, dict[str, str]]:
        """The runtime of this prompt and its files' resolved paths (a file the session's directory does not
        hold as a regular file is a 422 `bad_file`: the request is well formed, the disk says no; nothing sent)."""
        try:
            resolved = resolve_paths(cmd.args.get("files") or [], directory)
        except AttachmentError as e:
            metrics.PROMPTS.labels(runtime="none", outcome="refused_file").inc()
            raise CommandError("bad_file", str(e)) from None
        choice = await self.choose(sid)
        await self.queue.move(key, (PENDING,), PENDING, runtime=choice.runtime)
        return choice, resolved

    @staticmethod
    def choice_fields(choice: RuntimeChoice) -> dict[str, Any]:
        out: dict[str, Any] = {"runtime": choice.runtime, "runtime_basis": choice.basis}
        if choice.note is not None:
            out["runtime_note"] = choice.note
        return out

    @staticmethod
    def v2_prompt(cmd: Command, resolved: dict[str, str]) -> tuple[str, list[dict[str, Any]] | None]:
        """The v2 prompt's text (text files appended) and `files` (images)."""
        files = cmd.args.get("files")
        if not files:
            return cmd.args["text"], None
        try:
            text = v2_text(cmd.args["text"], files, resolved, text_contents(files, resolved))
        except AttachmentError as e:
            raise CommandError("bad_file", str(e)) from None
        return text, v2_files(files, resolved) or None

    async def turn_end(self, sid: str, directory: str) -> tuple[bool, int | None]:
        """Whether the session's legacy turn has ended (bridge.commands.legacy_delivery.turn_ended), and
        when (upstream's epoch ms of its last step's completion, if it says)."""
        busy = await self.upstream.legacy_busy(sid, directory)
        newest = None if busy else newest_message(await self.upstream.legacy_newest_message(sid, directory))
        return turn_ended(busy, newest, self._now_ms()), None if newest is None else newest.completed_ms

    async def turn_over(self, sid: str, directory: str) -> bool:
        return (await self.turn_end(sid, directory))[0]

    async def legacy(self, cmd: Command, key: CommandKey, sid: str, directory: str, info: Mapping[str, Any],
                     message_id: str, choice: RuntimeChoice) -> tuple[int, dict[str, Any]]:
        """Send now, or queue behind the running turn and the prompts queued before (FIFO)."""
        delivery = cmd.args["delivery"]
        body = legacy_body(cmd.args, message_id, info, directory)
        result = prompt_result(cmd.command_id, message_id, delivery, "sent", self.choice_fields(choice))
        row = await self.queue.row(key)
        if row is not None and row.state == PENDING and delivery == "queue":
            ahead = await self.queue.queued_ahead(sid, key)
            busy = ahead == 0 and not await self.turn_over(sid, directory)
            if first_state("legacy", delivery, busy, ahead) == QUEUED:
                queued = {**result, "state": QUEUED}
                if await self.queue.move(key, (PENDING,), QUEUED, announce=QUEUED, http_status=200,
                                         result=queued):
                    self.wake()
                    metrics.PROMPTS.labels(runtime="legacy", outcome="queued").inc()
                    return 200, queued
        status, answer = await self.legacy_sender.deliver(key, sid, directory, body, result)
        metrics.PROMPTS.labels(runtime="legacy", outcome="sent").inc()
        return status, answer

    async def drop_queued(self, sid: str, reason: str) -> list[str]:
        return await self.queue.drop_queued(sid, reason)

    # The queue's side (bridge.command_service.legacy_queue.QueueSender): what the sender asks, by these only.

    def wake(self) -> None:
        """Tell the queue's sender to look now (a prompt was queued, a session of ours went idle)."""
        self._woken.set()

    async def woken(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for a wake-up; whether one came."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._woken.wait()
        came = self._woken.is_set()
        self._woken.clear()
        return came

    async def waiting(self) -> list[PromptRow]:
        """The oldest waiting prompt of every session that has one (FIFO per session)."""
        return await self.queue.heads()

    async def session_deleted(self, sid: str) -> bool:
        return await self.queue.session_deleted(sid)

    async def session_info(self, sid: str) -> dict[str, Any]:
        """`GET /api/session/{id}`: SessionNotFound for a session the serve no longer has."""
        return await self.upstream.session(sid)

    async def settle(self, row: PromptRow, from_state: str, status: int, result: dict[str, Any]) -> bool:
        """A waiting prompt made final as `failed` without a send (its session deleted, a file gone)."""
        return await self.queue.move(row.key, (from_state,), FAILED, http_status=status, result=result)

    async def send_queued(self, row: PromptRow, directory: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A waiting prompt delivered exactly once (bridge.command_service.legacy_prompts); a claim held by
        another sender is an UpstreamUnavailable at once (the next look tries again)."""
        assert row.result is not None
        return await self.legacy_sender.deliver(row.key, row.session_id, directory, body, row.result,
                                                wait_held=False)
