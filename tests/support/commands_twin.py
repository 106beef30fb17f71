"""An in-memory twin of the `UpstreamCommands` seam (bridge/command_service): what the command tests drive
instead of a serve. It records every call and answers like the serve would (docs/upstream.md §6, §17).
It is a twin of the Python seam, not of the HTTP wire: the wire is the fake upstream's (fake_upstream.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bridge.errors import SessionNotFound

SID = "ses_dcf69c6a5ffeHQxvSA7FrlelcL"
OTHER = "ses_dd5b82c1bffeRY2dx3KoNdpwXy"
DIR = "/srv/agent/proj"


class UpstreamCommandsTwin:
    """Stands in for `UpstreamCommands`: records every call, answers like the serve (docs/upstream.md §6, §17)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.admitted: dict[str, dict[str, Any]] = {}  # message id -> admission
        self.model: dict[str, str] | None = None
        self.connected = {("mock", "mock-1")}
        self.v2_pending: list[dict[str, Any]] = []
        self.legacy_pending: list[dict[str, Any]] = []
        self.fail_prompt: Exception | None = None
        # the legacy store (docs/upstream.md §19): user messages by id, oldest first, per session
        self.legacy_users: dict[str, list[dict[str, Any]]] = {}
        # awaited inside `prompt_async` before the message is stored: a test holds a sender in its send
        self.in_legacy_send: Callable[[], Awaitable[None]] | None = None

    async def session(self, sid: str) -> dict[str, Any]:
        self.calls.append(("session", (sid,)))
        if sid not in (SID, OTHER):
            raise SessionNotFound("GET: HTTP 404", 404)
        out: dict[str, Any] = {"id": sid, "location": {"directory": DIR}}
        if self.model is not None:
            out["model"] = self.model
        return out

    async def prompt(self, sid: str, directory: str, mid: str, text: str, delivery: str,
                     files: list[dict[str, Any]] | None = None) -> tuple[int, dict[str, Any]]:
        self.calls.append(("prompt", (sid, directory, mid, text, delivery)))
        if self.fail_prompt is not None:
            raise self.fail_prompt
        if mid not in self.admitted:
            self.admitted[mid] = {"admittedSeq": len(self.admitted) + 1, "id": mid}
        return 200, self.admitted[mid]

    async def legacy_prompt(self, sid: str, directory: str, body: dict[str, Any]) -> int:
        """Not idempotent, like the serve's (docs/upstream.md §17): a repeat adds its parts to the message."""
        self.calls.append(("legacy_prompt", (sid, body["messageID"])))
        if self.in_legacy_send is not None:
            await self.in_legacy_send()
        users = self.legacy_users.setdefault(sid, [])
        same = [m for m in users if m["info"]["id"] == body["messageID"]]
        if same:
            same[0]["parts"] += body["parts"]
        else:
            users.append({"info": {"id": body["messageID"], "role": "user"}, "parts": list(body["parts"])})
        return 204

    async def legacy_message(self, sid: str, directory: str, message_id: str) -> dict[str, Any] | None:
        if self.fail_prompt is not None:  # the serve is away: the look fails like the send would
            raise self.fail_prompt
        return next((m for m in self.legacy_users.get(sid, []) if m["info"]["id"] == message_id), None)

    async def legacy_recent_user_ids(self, sid: str, directory: str, limit: int) -> list[str]:
        return [m["info"]["id"] for m in self.legacy_users.get(sid, [])[-limit:]]

    async def legacy_newest_message(self, sid: str, directory: str) -> dict[str, Any] | None:
        return None  # the twin runs no turns: a queued prompt may always go

    async def serve_version(self) -> str | None:
        return "1.18.33"

    async def connected_models(self, directory: str) -> set[tuple[str, str]]:
        return self.connected

    async def default_model(self, directory: str) -> tuple[str, str] | None:
        return ("mock", "mock-1")

    async def interrupt(self, sid: str, directory: str) -> int:
        self.calls.append(("interrupt", (sid,)))
        return 204

    async def legacy_busy(self, sid: str, directory: str) -> bool:
        return False

    async def switch_model(self, sid: str, directory: str, provider: str, model: str) -> int:
        self.calls.append(("model", (sid, provider, model)))
        self.model = {"providerID": provider, "id": model}
        return 204

    async def switch_agent(self, sid: str, directory: str, agent: str) -> int:
        self.calls.append(("agent", (sid, agent)))
        return 204

    async def v2_permissions(self, sid: str, directory: str) -> list[dict[str, Any]]:
        return self.v2_pending

    async def legacy_permissions(self, directory: str) -> list[dict[str, Any]]:
        return self.legacy_pending

    async def reply_v2(self, sid: str, directory: str, rid: str, reply: str) -> int:
        self.calls.append(("reply_v2", (sid, rid, reply)))
        self.v2_pending = [p for p in self.v2_pending if p["id"] != rid]
        return 204

    async def reply_legacy(self, directory: str, rid: str, reply: str) -> int:
        self.calls.append(("reply_legacy", (rid, reply)))
        self.legacy_pending = [p for p in self.legacy_pending if p["id"] != rid]
        return 200

    async def create_session(self, sid: str, directory: str, model: Any, agent: Any) -> dict[str, Any]:
        self.calls.append(("create", (sid, directory)))
        return {"id": sid, "location": {"directory": directory}}

    def count(self, name: str) -> int:
        return sum(1 for n, _ in self.calls if n == name)

