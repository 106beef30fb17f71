"""The OpenCode 1.x driver (1.18.33, docs/upstream.md): the port of bridge.upstream.driver kept by today's
client and command calls, unchanged — the durable stream `GET /api/session/{id}/event?after=` (§3), the
hints and sweeps of `/global/event` (§15: its sync twins carry each persisted event's seq; every
(re)connect means hints were missed, as the daemon's repair-on-reconnect already treats it), deltas and
requests from `/api/event` (§1), turn state from `/api/session/active` (§6), commands through
`UpstreamCommands` and `UpstreamRequests` (docs/commands.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bridge.errors import UpstreamError
from bridge.events.envelope import Envelope, parse_frame
from bridge.events.fields import location_directory
from bridge.events.syncframes import parse_global_frame
from bridge.upstream.client import UpstreamClient
from bridge.upstream.commands import UpstreamCommands
from bridge.upstream.driver import SWEEP, Admission, Change, Delivery, ListedSession, LogRead
from bridge.upstream.driver_streams import hint, log_reads, parsed
from bridge.upstream.requests import UpstreamRequests


def _global_change(data: str) -> Change | None:
    frame = parse_global_frame(data)
    if frame.envelope.type == "server.connected":
        return SWEEP
    if not frame.twin:
        return None
    return hint(frame.envelope.aggregate_id, frame.envelope.seq)


def _live(data: str) -> Envelope | None:
    env = parse_frame(data)
    return None if env.type == "server.connected" else env


class Gen1Driver:
    generation = 1

    def __init__(self, client: UpstreamClient) -> None:
        self.client = client
        self._commands = UpstreamCommands(client)
        self._requests = UpstreamRequests(client)

    async def list_sessions(self) -> list[ListedSession]:
        out = []
        for s in await self.client.list_sessions():
            parent = s.get("parentID")
            out.append(ListedSession(str(s["id"]), location_directory(s), parent if isinstance(parent, str) else None))
        return out

    async def running_sessions(self) -> set[str]:
        return {sid for sid in await self.client.active() if isinstance(sid, str)}

    @asynccontextmanager
    async def follow(self, session_id: str, after: int) -> AsyncIterator[AsyncIterator[LogRead]]:
        async with self.client.open_session_events(session_id, after) as body:
            yield log_reads(body)

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[AsyncIterator[Change]]:
        async with self.client.open_global_events() as body:
            yield parsed(body, _global_change, "global")

    @asynccontextmanager
    async def live(self) -> AsyncIterator[AsyncIterator[Envelope]]:
        async with self.client.open_live_events() as body:
            yield parsed(body, _live, "live")

    async def prompt(self, session_id: str, directory: str, message_id: str, text: str,
                     delivery: Delivery) -> Admission:
        _, data = await self._commands.prompt(session_id, directory, message_id, text, delivery)
        seq = data.get("admittedSeq")
        return Admission(message_id, seq if isinstance(seq, int) and not isinstance(seq, bool) else None, None, data)

    async def interrupt(self, session_id: str, directory: str) -> bool | None:
        await self._commands.interrupt(session_id, directory)
        return None  # 204 either way: 1.x does not say whether a turn ran (docs/upstream.md §4.2)

    async def switch_model(self, session_id: str, directory: str, provider_id: str, model_id: str) -> None:
        await self._commands.switch_model(session_id, directory, provider_id, model_id)

    async def switch_agent(self, session_id: str, directory: str, agent: str) -> None:
        await self._commands.switch_agent(session_id, directory, agent)

    async def reply_permission(self, session_id: str, directory: str, request_id: str, reply: str) -> None:
        await self._commands.reply_v2(session_id, directory, request_id, reply)

    async def reply_question(self, session_id: str, directory: str, request_id: str,
                             answers: list[list[str]] | None) -> None:
        status = await self._requests.answer_question("v2", session_id, directory, request_id, answers)
        if status >= 300:
            raise UpstreamError(f"question {request_id}: HTTP {status}", status)
