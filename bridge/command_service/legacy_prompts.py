"""Sending a prompt through the legacy runtime exactly once (docs/commands.md, "Runtime affinity",
"Exactly once"); the states and decisions are bridge.commands.legacy_delivery's.

`deliver` takes the row's send claim (`sending`, its token: one sender at a time, by compare-and-set),
looks for the derived message id upstream (`GET /session/{id}/message/{messageID}`, then an earlier
attempt's id with the same digest among the newest messages), renews the claim and sends `prompt_async`
only if neither is there, sees the message stored upstream, and commits `done`.
The request carries the session's model and agent (those chosen through `/model` and `/agent`, read from
`GET /api/session/{id}`): the legacy runtime takes them per prompt (docs/upstream.md §19).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import structlog

from bridge.command_service.attachment_files import resolve_paths
from bridge.commands.attachments import legacy_file_parts
from bridge.commands.legacy_delivery import (
    CLAIM_WINDOW_S,
    CONFIRM_WAIT_S,
    DONE,
    RECENT_MESSAGES,
    SEND_TIMEOUT_S,
    SENDING,
    ClaimAction,
    SendAction,
    confirm_wait_s,
    earlier_attempt,
    send_action,
)
from bridge.errors import UpstreamUnavailable
from bridge.store.ports.commands import CommandKey
from bridge.store.ports.prompt_queue import PromptQueuePort, PromptRow
from bridge.upstream.commands import UpstreamCommands

_log = structlog.get_logger("bridge.commands")
CONFIRM_POLL_S = 0.1
# A claim held by another sender: look again this often, until a little after it would have aged out.
HELD_POLL_S = 0.25
HELD_POLLS = int((CLAIM_WINDOW_S + 2.0) / HELD_POLL_S)


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
    def __init__(self, queue: PromptQueuePort, upstream: UpstreamCommands, *,
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

    async def _find(self, sid: str, directory: str, message_id: str, wait_s: float) -> str | None:
        """The id under which the command's message is upstream already: its own, or an earlier attempt's
        with the same digest among the newest messages (a retry whose row was lost); None if neither."""
        if await self._exists(sid, directory, message_id, wait_s):
            return message_id
        recent = await self.upstream.legacy_recent_user_ids(sid, directory, RECENT_MESSAGES)
        return earlier_attempt(message_id, recent)

    async def _claim(self, key: CommandKey, token: str, wait_held: bool) -> tuple[ClaimAction, PromptRow]:
        """Take the row's send claim; a claim held by another sender is waited out (its row becomes final,
        or the claim ages out) when `wait_held`, else it is an UpstreamUnavailable at once."""
        for attempt in range(HELD_POLLS if wait_held else 1):
            action, row = await self.queue.claim(key, token)
            if row is None:
                raise UpstreamUnavailable("the prompt's row is gone")
            if action is not ClaimAction.HELD:
                return action, row
            if attempt == 0:
                _log.info("legacy_send_held", command_id=key.command_id, session_id=row.session_id, wait=wait_held)
            if wait_held:
                await asyncio.sleep(HELD_POLL_S)
        raise UpstreamUnavailable("another sender is delivering this prompt")

    async def deliver(self, key: CommandKey, sid: str, directory: str, body: dict[str, Any],
                      result: dict[str, Any], *, wait_held: bool = True) -> tuple[int, dict[str, Any]]:
        """Send the row's prompt unless it is upstream already; (http status, answer). `result` is the
        answer to store (its `state` becomes `sent`)."""
        command_id = key.command_id
        token = uuid.uuid4().hex  # this attempt's send claim
        action, row = await self._claim(key, token, wait_held)
        if action is ClaimAction.ANSWER_STORED:
            return row.http_status or 200, row.result or {}
        message_id = str(body["messageID"])
        prior = row.state
        try:
            found = await self._find(sid, directory, message_id, confirm_wait_s(prior))
        except BaseException:  # nothing sent (the serve or the database away): the claim goes at once
            with contextlib.suppress(Exception):
                await self.queue.release(key, token)
            raise
        status: int | None = None
        if send_action(SENDING, found is not None) is SendAction.SEND:
            if not await self.queue.renew(key, token):  # the fence: taken over meanwhile, send nothing
                _log.warning("legacy_send_overtaken", command_id=command_id, session_id=sid)
                raise UpstreamUnavailable("another sender took this prompt over")
            try:
                async with asyncio.timeout(SEND_TIMEOUT_S):  # within the claim (legacy_delivery)
                    status = await self.upstream.legacy_prompt(sid, directory, body)
            except TimeoutError:
                raise UpstreamUnavailable("prompt_async did not answer in time") from None
            if self._exit_after is not None and self._exit_after == command_id:
                os._exit(99)  # test hook (docs/commands.md, "Testing the crash window")
            if not await self._exists(sid, directory, message_id, CONFIRM_WAIT_S):
                # taken (204) but not stored: the serve died meanwhile. Left `sending`: a retry (or the
                # queue) looks again once the claim ages out and sends it again if it is still missing.
                raise UpstreamUnavailable("the serve took the prompt but does not show its message")
            found = message_id
        assert found is not None
        now = datetime.now().astimezone()
        answer = {**result, "state": "sent", "message_id": found}
        earlier = found != message_id
        if earlier:  # a retry whose row was lost (docs/commands.md, "Exactly once")
            _log.warning("legacy_prompt_earlier_attempt", command_id=command_id, session_id=sid, message_id=found)
        await self.queue.move(key, (SENDING,), DONE, announce="sent", http_status=200, result=answer,
                              upstream_status=status, sent_at=now, completed_at=now,
                              **({"upstream_id": found} if earlier else {}))
        _log.info("legacy_prompt_sent", command_id=command_id, session_id=sid, resent=status is not None,
                  found_upstream=status is None, earlier_id=earlier, prior_state=prior)
        return 200, answer
