"""A small test client of `/v1/ws` (docs/websocket.md): collects every server message per type, each checked
against the AsyncAPI document (tests/support/asyncapi.py): a frame outside it fails the test at the next
look at the client (`of`, `wait_for`, `wait_closed`, `close`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import aiohttp

from tests.support.asyncapi import FrameOutsideDocument, check_server_frame
from tests.support.waiting import wait_until


class WsClient:
    def __init__(self, http: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.http = http
        self.ws = ws
        self.messages: list[dict[str, Any]] = []
        self.received_at: list[float] = []  # time.monotonic() of each message, same index
        self.close_code: int | None = None
        self.outside_document: list[str] = []  # frames the AsyncAPI document does not describe
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, url: str, token: str | None = None, *, read: bool = True,
                      headers: dict[str, str] | None = None) -> WsClient:
        http = aiohttp.ClientSession()
        full = url + "/v1/ws" + (f"?token={token}" if token else "")
        try:
            ws = await http.ws_connect(full, headers=headers or {}, autoping=True)
        except BaseException:
            await http.close()
            raise
        client = cls(http, ws)
        if read:
            client.start_reading()
        return client

    def start_reading(self) -> None:
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type is aiohttp.WSMsgType.TEXT:
                self.received_at.append(time.monotonic())
                frame = json.loads(msg.data)
                problems = check_server_frame(frame)
                if problems:
                    self.outside_document.append(f"{problems[:5]} in {msg.data[:600]}")
                self.messages.append(frame)
        self.close_code = self.ws.close_code

    def check_document(self) -> None:
        """Fails the test when a frame received so far is outside the AsyncAPI document."""
        if self.outside_document:
            raise FrameOutsideDocument(f"{len(self.outside_document)} frame(s) outside the AsyncAPI document, "
                                       f"first: {self.outside_document[0]}")

    async def send(self, **op: Any) -> None:
        await self.ws.send_str(json.dumps(op))

    async def subscribe(self, session: str, after: int | None = None, **extra: Any) -> None:
        op: dict[str, Any] = {"op": "subscribe", "session": session, **extra}
        if after is not None:
            op["after"] = after
        await self.send(**op)

    def of(self, type_: str, session: str | None = None) -> list[dict[str, Any]]:
        self.check_document()
        return [m for m in self.messages if m["type"] == type_ and (session is None or m.get("session") == session)]

    def time_of(self, message: dict[str, Any]) -> float:
        """When `message` (one of `messages`) arrived, `time.monotonic()`."""
        return self.received_at[next(i for i, m in enumerate(self.messages) if m is message)]

    def seqs(self, session: str | None = None) -> list[int]:
        return [m["seq"] for m in self.of("event", session)]

    async def wait_for(self, type_: str, timeout: float = 20, session: str | None = None,
                       **match: Any) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            for m in self.of(type_, session):
                if all(m.get(k) == v for k, v in match.items()):
                    return m
            return None

        return await wait_until(found, timeout, 0.02, message=f"{type_} {match} (have {len(self.messages)})")

    def status_of(self, session: str) -> str | None:
        """The session's status as a client must track it (docs/websocket.md): the `subscribed` frame carries
        the status at subscription, later `status` frames change it."""
        self.check_document()
        current = None
        for m in self.messages:
            if m.get("session") == session and m["type"] in ("subscribed", "status"):
                current = m["status"]
        return current

    async def wait_status(self, session: str, status: str, timeout: float = 20) -> None:
        await wait_until(lambda: self.status_of(session) == status, timeout, 0.02,
                         message=f"status {status!r} of {session} (now {self.status_of(session)!r})")

    async def wait_closed(self, timeout: float = 20) -> int:
        await wait_until(lambda: self._reader is not None and self._reader.done(), timeout, 0.02,
                         message="websocket closed")
        assert self.close_code is not None
        self.check_document()
        return self.close_code

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        await self.http.close()
        self.check_document()
