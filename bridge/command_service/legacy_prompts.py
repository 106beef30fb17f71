"""Sending a prompt through the legacy runtime exactly once (docs/commands.md, "Runtime affinity",
"Exactly once"); the states and decisions are bridge.commands.legacy_delivery's.

`deliver` holds the row's send lock, commits `sending`, looks for the derived message id upstream
(`GET /session/{id}/message/{messageID}`), sends `prompt_async` only if it is absent, sees the message
stored upstream, and commits `done`.
The request carries the session's model and agent (those chosen through `/model` and `/agent`, read from
`GET /api/session/{id}`): the legacy runtime takes them per prompt (docs/upstream.md §19).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import structlog

from bridge.command_service.attachment_files import resolve_paths
from bridge.commands.attachments import legacy_file_parts
from bridge.commands.legacy_delivery import (
    CONFIRM_WAIT_S,
    DONE,
    PENDING,
    QUEUED,
    SENDING,
    SendAction,
    confirm_wait_s,
    send_action,
)
from bridge.errors import UpstreamUnavailable
from bridge.store.commands_pending import CommandKey, PromptQueueStore
from bridge.upstream.commands import UpstreamCommands

_log = structlog.get_logger("bridge.commands")
CONFIRM_POLL_S = 0.1


def legacy_body(args: Mapping[str, Any], message_id: str, info: Mapping[str, Any],
                directory: str) -> dict[str, Any]:
    """The `prompt_async` body of a prompt row: its text and files, the session's model and agent."""
    files = list(args.get("files") or [])
    parts: list[dict[str, Any]] = [{"type": "text", "text": args["text"]}]
    parts += legacy_file_parts(files, resolve_paths(files, directory))
    body: dict[str, Any] = {"messageID": message_id, "parts": parts}
    m = info.get("model")
    if isinstance(m, dict) and isinstance(m.get("providerID"), str) and isinstance(m.get("id"), str):
        body["model"] = {"providerID": m["providerID"], "modelID": m["id"]}
    agent = info.get("agent")
    if isinstance(agent, str) and agent:
        body["agent"] = agent
    return body


def prompt_result(command_id: str, message_id: str, delivery: str, state: str,
                  choice: Mapping[str, Any]) -> dict[str, Any]:
    """A legacy prompt's answer: the v2 one's fields (no `admitted_seq`: a legacy prompt has no admission
    event) plus `state` and the runtime choice."""
    return {"command_id": command_id, "message_id": message_id, "admitted_seq": None, "delivery": delivery,
            "state": state, **choice}


class LegacyPrompts:
    def __init__(self, queue: PromptQueueStore, upstream: UpstreamCommands, *,
                 exit_after: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.queue = queue
        self.upstream = upstream
        self._exit_after = exit_after
        self._clock = clock

    async def _exists(self, sid: str, directory: str, message_id: str, wait_s: float) -> bool:
        deadline = self._clock() + wait_s
        while True:
            if await self.upstream.legacy_message(sid, directory, message_id) is not None:
                return True
            if self._clock() >= deadline:
                return False
            await asyncio.sleep(CONFIRM_POLL_S)

    async def deliver(self, key: CommandKey, sid: str, directory: str, body: dict[str, Any],
                      result: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Send the row's prompt unless it is upstream already; (http status, answer). `result` is the
        answer to store (its `state` becomes `sent`)."""
        command_id = key.command_id
        async with self.queue.sender_lock(key):
            row = await self.queue.row(key)
            assert row is not None
            message_id = str(body["messageID"])
            prior = row.state
            if send_action(prior, False) is SendAction.ANSWER_STORED:
                return row.http_status or 200, row.result or {}
            await self.queue.move(key, (PENDING, QUEUED, SENDING), SENDING, runtime="legacy")
            exists = await self._exists(sid, directory, message_id, confirm_wait_s(prior))
            status: int | None = None
            if send_action(SENDING, exists) is SendAction.SEND:
                status = await self.upstream.legacy_prompt(sid, directory, body)
                if self._exit_after is not None and self._exit_after == command_id:
                    os._exit(99)  # test hook (docs/commands.md, "Testing the crash window")
                if not await self._exists(sid, directory, message_id, CONFIRM_WAIT_S):
                    # taken (204) but not stored: the serve died meanwhile. Left `sending`: a retry (or the
                    # queue) looks again and sends it again if it is still missing.
                    raise UpstreamUnavailable("the serve took the prompt but does not show its message")
            now = datetime.now().astimezone()
            answer = {**result, "state": "sent"}
            await self.queue.move(key, (SENDING,), DONE, announce="sent", http_status=200, result=answer,
                                  upstream_status=status, sent_at=now, completed_at=now)
            _log.info("legacy_prompt_sent", command_id=command_id, session_id=sid, resent=status is not None,
                      found_upstream=exists, prior_state=prior)
            return 200, answer
