"""`Gen2Requests`: pending questions on an OpenCode 2.x serve, which asks forms instead (docs/upstream.md
§24): a session's pending forms (`GET /api/session/:id/form` → `{data: [Form.Info]}`) listed as the
questions the command door checks answers against (bridge.events.gen2.form_questions), and an answer sent
as the form's reply (`Gen2Driver.reply_question`: the form read, the chosen labels given as its fields'
values; a rejection cancels it). No legacy runtime: no legacy question or permission is ever pending."""

from __future__ import annotations

from typing import Any

from bridge.errors import SessionNotFound
from bridge.events.gen2 import form_questions
from bridge.upstream.gen2.driver import Gen2Driver
from bridge.upstream.requests import UpstreamRequests


class Gen2Requests(UpstreamRequests):
    async def v2_questions(self, session_id: str) -> list[dict[str, Any]]:
        try:
            _, got = await self._client.send_json("GET", self._client.session_path(session_id, "form"))
        except SessionNotFound:
            return []
        data = got.get("data") if isinstance(got, dict) else None
        forms = [f for f in data if isinstance(f, dict)] if isinstance(data, list) else []
        return [{"id": f.get("id"), "sessionID": session_id, "questions": form_questions(f)} for f in forms]

    async def legacy_questions(self, directory: str | None) -> list[dict[str, Any]]:
        return []

    async def legacy_permissions(self, directory: str | None) -> list[dict[str, Any]]:
        return []

    async def answer_question(self, runtime: str, session_id: str, directory: str | None, request_id: str,
                              answers: list[list[str]] | None) -> int:
        await Gen2Driver(self._client).reply_question(session_id, directory or "", request_id, answers)
        return 204
