"""The upstream routes of pending requests (docs/upstream.md §4.4, §16, §18): the list routes the re-sync
reads, and the routes that answer a question. Through `UpstreamClient.send_json` (transport, auth,
bounded bodies); legacy routes are location-scoped, so they carry the directory.

| what | legacy | v2 |
|---|---|---|
| pending questions | `GET /question` (every session of the location) | `GET /api/session/{id}/question` |
| answer | `POST /question/{id}/reply {answers}` → `true` | `POST /api/session/{id}/question/{rid}/reply` → 204 |
| reject | `POST /question/{id}/reject` | `POST /api/session/{id}/question/{rid}/reject` → 204 |
| pending permissions | `GET /permission` | `GET /api/session/{id}/permission` (`UpstreamClient`) |
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from bridge.errors import SessionNotFound
from bridge.upstream.client import UpstreamClient


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _items(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, dict) and "data" in body:
        body = body["data"]
    return [i for i in body if isinstance(i, dict)] if isinstance(body, list) else []


class UpstreamRequests:
    def __init__(self, client: UpstreamClient) -> None:
        self._client = client

    async def legacy_questions(self, directory: str | None) -> list[dict[str, Any]]:
        _, got = await self._client.send_json("GET", "/question", directory=directory)
        return _items(got)

    async def legacy_permissions(self, directory: str | None) -> list[dict[str, Any]]:
        _, got = await self._client.send_json("GET", "/permission", directory=directory)
        return _items(got)

    async def v2_questions(self, session_id: str) -> list[dict[str, Any]]:
        """A session unknown upstream (404) has none."""
        try:
            _, got = await self._client.send_json("GET", self._client.session_path(session_id, "question"))
        except SessionNotFound:
            return []
        return _items(got)

    async def v2_permissions(self, session_id: str) -> list[dict[str, Any]]:
        return await self._client.pending_permissions(session_id)

    async def answer_question(self, runtime: str, session_id: str, directory: str | None, request_id: str,
                              answers: list[list[str]] | None) -> int:
        """Reply (`answers` given) or reject (`answers` None) on the routes of the runtime that asked."""
        action = "reject" if answers is None else "reply"
        body = None if answers is None else {"answers": answers}
        if runtime == "v2":
            path = self._client.session_path(session_id, "question", request_id, action)
            status, _ = await self._client.send_json("POST", path, body if body is not None else {},
                                                     directory=directory)
        else:
            status, _ = await self._client.send_json("POST", f"/question/{_q(request_id)}/{action}",
                                                     body if body is not None else {}, directory=directory)
        return status
