"""The sender of the bridge's own legacy queue (docs/commands.md, "The legacy queue").

Every replica runs one. It looks at the oldest waiting prompt of each session (FIFO per session) when a
prompt is queued, when a session of ours goes idle (`session.status` idle on `/global/event`, through
bridge.sessions.activity) and every POLL_S. The holder of the session's lease sends; a replica that sees
a waiting prompt of a session nobody follows warms it (claims the lease) and sends on a later look. A
`queued` row goes once the legacy turn has ended; a row left in `sending` (a sender died) is delivered at
once, which first looks for its message upstream (bridge.command_service.legacy_prompts). A prompt of a session
deleted upstream is `dropped`, never sent.
"""

from __future__ import annotations

import time
from typing import Protocol

import structlog

from bridge import metrics
from bridge.command_service.directory import directory_of
from bridge.command_service.legacy_prompts import legacy_body
from bridge.command_service.prompt_router import PromptRouter
from bridge.commands.attachments import AttachmentError
from bridge.commands.legacy_delivery import QUEUED, SENDING
from bridge.errors import SessionNotFound, UpstreamError, error_body
from bridge.store.ports.prompt_queue import PromptRow

_log = structlog.get_logger("bridge.commands")
POLL_S = 1.0
# After a wake-up (a session went idle, a prompt was queued), look this often for a while: the legacy
# status may still read busy for a moment after `session.idle`.
SOON_S, SOON_FOR_S = 0.1, 3.0


class Sessions(Protocol):
    """The part of bridge.sessions.supervisor.FollowerSupervisor the sender needs."""

    def owns(self, session_id: str) -> bool: ...
    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool: ...


class QueueSender:
    def __init__(self, router: PromptRouter, sessions: Sessions, poll_s: float = POLL_S) -> None:
        self._router = router
        self._sessions = sessions
        self._poll_s = poll_s
        self._soon_until = 0.0
        self._waiting = False  # the last look left prompts waiting

    def wake(self, session_id: str | None = None) -> None:
        """A session went idle upstream (bridge.sessions.activity): look now."""
        self._router.wake()

    async def run(self) -> None:
        while True:
            soon = self._waiting and time.monotonic() < self._soon_until
            if await self._router.woken(SOON_S if soon else self._poll_s):
                self._soon_until = time.monotonic() + SOON_FOR_S
            try:
                await self.look()
            except Exception as e:  # the database or the serve: the next look tries again
                _log.warning("queue_look_failed", error=f"{type(e).__name__}: {e}"[:300])

    async def look(self) -> int:
        """One pass over the waiting prompts; the number sent."""
        sent = 0
        heads = await self._router.waiting()
        self._waiting = bool(heads)
        for head in heads:
            try:
                sent += await self._one(head)
            except (UpstreamError, OSError) as e:
                _log.info("queued_prompt_not_sent_yet", command_id=head.command_id, session_id=head.session_id,
                          error=f"{type(e).__name__}: {e}"[:300])
        return sent

    async def _one(self, row: PromptRow) -> int:
        sid = row.session_id
        if await self._router.session_deleted(sid):
            if row.state == SENDING:  # its send may or may not have happened: final, as not_found
                gone = {"command_id": row.command_id, **error_body("not_found", "the session was deleted")}
                await self._router.settle(row, SENDING, 404, gone)
            return await self._drop(sid)
        if not self._sessions.owns(sid):
            self._sessions.warm(sid, None, "queued prompt")
            return 0
        try:
            info = await self._router.session_info(sid)
        except SessionNotFound:
            return await self._drop(sid)
        directory = directory_of(info)
        if directory is None:
            return 0
        ended_ms: int | None = None
        if row.state == QUEUED:
            over, ended_ms = await self._router.turn_end(sid, directory)
            if not over:
                return 0
        assert row.upstream_id is not None and row.result is not None
        try:
            body = legacy_body(row.body, row.upstream_id, info, directory)
        except AttachmentError as e:  # a file went away while the prompt waited: refused, nothing sent
            failed = {"command_id": row.command_id, **error_body("bad_file", str(e))}
            await self._router.settle(row, QUEUED, 422, failed)
            return 0
        lag_ms = None if ended_ms is None else max(0, int(time.time() * 1000) - ended_ms)  # turn end → send
        await self._router.send_queued(row, directory, body)
        if lag_ms is not None:
            metrics.QUEUED_PROMPT_SEND_SECONDS.observe(lag_ms / 1000)
        _log.info("queued_prompt_sent", command_id=row.command_id, session_id=sid, turn_end_to_sent_ms=lag_ms,
                  waited_s=round(time.time() - row.created_at.timestamp(), 3))
        return 1

    async def _drop(self, sid: str) -> int:
        """A deleted session's queued prompts are dropped, never sent (docs/commands.md)."""
        dropped = await self._router.drop_queued(sid, "session deleted")
        _log.info("queued_prompts_dropped", session_id=sid, command_ids=dropped, reason="session deleted")
        return 0
