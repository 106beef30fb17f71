"""`Gen2Commands`: the command door's upstream calls (bridge.upstream.commands) on an OpenCode 2.x serve,
from its source (docs/upstream.md §24.3; same files as bridge.upstream.gen2.driver). What 2.x spells like
1.x is inherited (session create, model, agent, the permission list, `/api/model`); what differs is here:

- prompt `POST …/prompt {id, text, files?, delivery}` (the prompt's fields at the top level) → the inbox
  entry (no `admittedSeq`: the admission is the log's `session.input.admitted`);
- permission replies `{reply, decision}` (both spellings read, bridge.upstream.gen2.driver); the serve's
  version from `GET /api/info`; the default model from `GET /api/model/default`; slash commands from
  `GET /api/command`;
- no legacy runtime: nothing is busy there, no legacy request is pending, and a legacy call (a legacy
  prompt, `/session/{id}/…` operations) is refused with an error naming 2.x instead of being sent to a
  route that answers the web app's page.
"""

from __future__ import annotations

from typing import Any

from bridge.errors import UpstreamError
from bridge.upstream.commands import UpstreamCommands
from bridge.upstream.gen2.driver import permission_reply_body


def _no_legacy(what: str) -> UpstreamError:
    return UpstreamError(f"{what}: OpenCode 2.x has no legacy routes (docs/upstream.md §24)", 501,
                         "NotOnOpenCode2")


class Gen2Commands(UpstreamCommands):
    async def prompt(self, session_id: str, directory: str, message_id: str, text: str,
                     delivery: str, files: list[dict[str, Any]] | None = None) -> tuple[int, dict[str, Any]]:
        body: dict[str, Any] = {"id": message_id, "text": text, "delivery": delivery}
        if files:
            body["files"] = files
        status, got = await self._call("POST", self._s(session_id, "prompt"), directory, body)
        data = self._data(got, "POST /api/session/{id}/prompt")
        return status, data if isinstance(data, dict) else {}

    async def reply_v2(self, session_id: str, directory: str, request_id: str, reply: str) -> int:
        path = self._s(session_id, "permission", request_id, "reply")
        status, _ = await self._call("POST", path, directory, permission_reply_body(reply))
        return status

    async def serve_version(self) -> str | None:
        _, got = await self._call("GET", "/api/info", None)
        version = got.get("version") if isinstance(got, dict) else None
        return version if isinstance(version, str) else None

    async def default_model(self, directory: str) -> tuple[str, str] | None:
        _, got = await self._call("GET", "/api/model/default", directory)
        model = got.get("data") if isinstance(got, dict) else None
        provider = model.get("providerID") if isinstance(model, dict) else None
        model_id = model.get("id") if isinstance(model, dict) else None
        return (provider, model_id) if isinstance(provider, str) and isinstance(model_id, str) else None

    async def slash_commands(self, directory: str | None) -> list[dict[str, Any]]:
        _, got = await self._call("GET", "/api/command", directory)
        data = got.get("data") if isinstance(got, dict) else None
        return [c for c in data if isinstance(c, dict)] if isinstance(data, list) else []

    async def legacy_busy(self, session_id: str, directory: str) -> bool:
        return False

    async def legacy_permissions(self, directory: str) -> list[dict[str, Any]]:
        return []

    async def legacy_abort(self, session_id: str, directory: str) -> int:
        raise _no_legacy("abort")

    async def reply_legacy(self, directory: str, request_id: str, reply: str) -> int:
        raise _no_legacy("legacy permission reply")

    async def legacy_prompt(self, session_id: str, directory: str, body: dict[str, Any]) -> int:
        raise _no_legacy("legacy prompt")

    async def legacy_message(self, session_id: str, directory: str, message_id: str) -> dict[str, Any] | None:
        raise _no_legacy("legacy message")

    async def legacy_recent_user_ids(self, session_id: str, directory: str, limit: int) -> list[str]:
        raise _no_legacy("legacy messages")

    async def legacy_newest_message(self, session_id: str, directory: str) -> dict[str, Any] | None:
        raise _no_legacy("legacy messages")

    async def session_op(self, session_id: str, directory: str, method: str, tail: str,
                         body: dict[str, Any] | None) -> tuple[int, Any]:
        raise _no_legacy(f"/session/{{id}}/{tail}" if tail else "/session/{id}")
