"""The upstream calls behind the bridge's commands (docs/commands.md), through `UpstreamClient.send_json`
(its transport, auth and bounded bodies). Every call carries the session's directory as the location
(docs/upstream.md §6: per-session routes ignore it, location-scoped ones — legacy routes, `/api/model` —
need it); session paths come from `UpstreamClient.session_path` (id checked, segments quoted), other path
segments are quoted here."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from bridge.errors import SessionNotFound, UpstreamError
from bridge.upstream.client import UpstreamClient


def _q(segment: str) -> str:
    return quote(segment, safe="")


class UpstreamCommands:
    def __init__(self, client: UpstreamClient) -> None:
        self._client = client

    async def _call(self, method: str, path: str, directory: str | None, body: Any = None) -> tuple[int, Any]:
        return await self._client.send_json(method, path, body, directory=directory)

    def _s(self, session_id: str, *rest: str) -> str:
        return self._client.session_path(session_id, *rest)
    @staticmethod
    def _data(body: Any, what: str) -> Any:
        if not isinstance(body, dict) or "data" not in body:
            raise UpstreamError(f"{what}: expected a {{data: …}} body")
        return body["data"]

    async def create_session(self, session_id: str, directory: str, model: dict[str, str] | None,
                             agent: str | None) -> dict[str, Any]:
        """`POST /api/session` with our derived id: the location goes in the body only (§6); sending the
        same id again returns the same session (checked on 1.18.33), so a retry is safe."""
        body: dict[str, Any] = {"id": session_id, "location": {"directory": directory}}
        if model is not None:
            body["model"] = model
        if agent is not None:
            body["agent"] = agent
        _, got = await self._call("POST", "/api/session", directory, body)
        data = self._data(got, "POST /api/session")
        return data if isinstance(data, dict) else {}

    async def session(self, session_id: str) -> dict[str, Any]:
        _, got = await self._call("GET", self._s(session_id), None)
        data = self._data(got, "GET /api/session/{id}")
        return data if isinstance(data, dict) else {}

    async def prompt(self, session_id: str, directory: str, message_id: str, text: str,
                     delivery: str, files: list[dict[str, Any]] | None = None) -> tuple[int, dict[str, Any]]:
        """v2 prompt with our message id: same id + same body → the same admission (§17)."""
        prompt: dict[str, Any] = {"text": text}
        if files:
            prompt["files"] = files
        body = {"id": message_id, "prompt": prompt, "delivery": delivery}
        status, got = await self._call("POST", self._s(session_id, "prompt"), directory, body)
        data = self._data(got, "POST /api/session/{id}/prompt")
        return status, data if isinstance(data, dict) else {}

    async def interrupt(self, session_id: str, directory: str) -> int:
        status, _ = await self._call("POST", self._s(session_id, "interrupt"), directory)
        return status

    async def legacy_busy(self, session_id: str, directory: str) -> bool:
        """Whether a legacy-driven turn runs (`GET /session/status`; v2 turns never show there, §6)."""
        _, got = await self._call("GET", "/session/status", directory)
        st = got.get(session_id) if isinstance(got, dict) else None
        return isinstance(st, dict) and st.get("type") not in (None, "idle")

    async def legacy_abort(self, session_id: str, directory: str) -> int:
        status, _ = await self._call("POST", f"/session/{_q(session_id)}/abort", directory)
        return status

    async def switch_model(self, session_id: str, directory: str, provider_id: str, model_id: str) -> int:
        body = {"model": {"providerID": provider_id, "id": model_id}}
        status, _ = await self._call("POST", self._s(session_id, "model"), directory, body)
        return status

    async def session_op(self, session_id: str, directory: str, method: str, tail: str,
                         body: dict[str, Any] | None) -> tuple[int, Any]:
        """A legacy session route `/session/{id}[/tail]` (rename, revert, unrevert, fork, slash command;
        docs/upstream.md §20, §22): its status and decoded answer."""
        path = f"/session/{_q(session_id)}" + (f"/{tail}" if tail else "")
        return await self._call(method, path, directory, body)

    async def slash_commands(self, directory: str | None) -> list[dict[str, Any]]:
        """`GET /command`: the serve's slash commands for a location (name, description, agent, model …)."""
        _, got = await self._call("GET", "/command", directory)
        return [c for c in got if isinstance(c, dict)] if isinstance(got, list) else []

    async def switch_agent(self, session_id: str, directory: str, agent: str) -> int:
        status, _ = await self._call("POST", self._s(session_id, "agent"), directory, {"agent": agent})
        return status

    async def v2_permissions(self, session_id: str, directory: str) -> list[dict[str, Any]]:
        _, got = await self._call("GET", self._s(session_id, "permission"), directory)
        data = self._data(got, "GET /api/session/{id}/permission")
        return [p for p in data if isinstance(p, dict)] if isinstance(data, list) else []

    async def legacy_permissions(self, directory: str) -> list[dict[str, Any]]:
        _, got = await self._call("GET", "/permission", directory)
        return [p for p in got if isinstance(p, dict)] if isinstance(got, list) else []

    async def reply_v2(self, session_id: str, directory: str, request_id: str, reply: str) -> int:
        path = self._s(session_id, "permission", request_id, "reply")
        status, _ = await self._call("POST", path, directory, {"reply": reply})
        return status

    async def reply_legacy(self, directory: str, request_id: str, reply: str) -> int:
        status, _ = await self._call("POST", f"/permission/{_q(request_id)}/reply", directory, {"reply": reply})
        return status

    async def connected_models(self, directory: str) -> set[tuple[str, str]]:
        """(provider id, model id) of every model the serve can use in this location: `/api/model` lists
        only models of providers with a credential (docs/upstream.md §6, `{location, data}` body)."""
        _, got = await self._call("GET", "/api/model", directory)
        data = self._data(got, "GET /api/model")
        return {(str(m.get("providerID")), str(m.get("id"))) for m in data if isinstance(m, dict)} \
            if isinstance(data, list) else set()

    async def default_model(self, directory: str) -> tuple[str, str] | None:
        """The configured `model` (`provider/model`) of the location (legacy `GET /config`)."""
        _, got = await self._call("GET", "/config", directory)
        raw = got.get("model") if isinstance(got, dict) else None
        if not isinstance(raw, str) or "/" not in raw:
            return None
        provider, _, model = raw.partition("/")
        return provider, model

    # -- the legacy prompt path (docs/commands.md, "Runtime affinity") ------------------------------------

    async def serve_version(self) -> str | None:
        """The serve's version from `GET /global/health` (`{healthy, version}`, docs/upstream.md §13)."""
        _, got = await self._call("GET", "/global/health", None)
        version = got.get("version") if isinstance(got, dict) else None
        return version if isinstance(version, str) else None

    async def legacy_prompt(self, session_id: str, directory: str, body: dict[str, Any]) -> int:
        """Legacy `POST /session/{id}/prompt_async` (`{messageID, parts, model?, agent?}` → 204). Not
        idempotent (§17): the caller looks for the message first."""
        status, _ = await self._call("POST", f"/session/{_q(session_id)}/prompt_async", directory, body)
        return status

    async def legacy_message(self, session_id: str, directory: str, message_id: str) -> dict[str, Any] | None:
        """Legacy `GET /session/{id}/message/{messageID}`: `{info, parts}`, None when it does not exist
        (404 `NotFoundError`)."""
        try:
            _, got = await self._call("GET", f"/session/{_q(session_id)}/message/{_q(message_id)}", directory)
        except SessionNotFound:
            return None
        return got if isinstance(got, dict) else None

    async def legacy_recent_user_ids(self, session_id: str, directory: str, limit: int) -> list[str]:
        """The ids of the user messages among the session's `limit` newest in the legacy store
        (`GET /session/{id}/message?limit=N`, docs/upstream.md §19)."""
        query = urlencode({"limit": str(limit), "directory": directory})  # a legacy route (docs/upstream.md §6)
        _, got = await self._call("GET", f"/session/{_q(session_id)}/message?{query}", None)
        out: list[str] = []
        for item in got if isinstance(got, list) else []:
            info = item.get("info") if isinstance(item, dict) else None
            if isinstance(info, dict) and info.get("role") == "user" and isinstance(info.get("id"), str):
                out.append(info["id"])
        return out

    async def legacy_newest_message(self, session_id: str, directory: str) -> dict[str, Any] | None:
        """The newest message of the legacy store (`GET /session/{id}/message?limit=1`), its `info`."""
        query = urlencode({"limit": "1", "directory": directory})  # a legacy route (docs/upstream.md §6)
        _, got = await self._call("GET", f"/session/{_q(session_id)}/message?{query}", None)
        item = got[-1] if isinstance(got, list) and got else None
        info = item.get("info") if isinstance(item, dict) else None
        return info if isinstance(info, dict) else None
