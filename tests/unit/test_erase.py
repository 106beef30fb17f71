"""bridge.command_service.erase: the `erase` command — the mirror first (a tombstone), then, when asked, the
serve (`DELETE /session/{id}`; a 404 there means it is gone already)."""

from __future__ import annotations

from typing import Any

from bridge.command_service.erase import run_erase
from bridge.commands.model import parse_command
from bridge.errors import SessionNotFound
from tests.support.commands_twin import DIR, SID, UpstreamCommandsTwin
from tests.support.door_twins import DoorStoreTwin


class _Serve(UpstreamCommandsTwin):
    def __init__(self, has: bool) -> None:
        super().__init__()
        self.has = has

    async def session_op(self, sid: str, directory: str, method: str, tail: str,
                         body: Any) -> tuple[int, Any]:
        self.calls.append(("session_op", (sid, directory, method, tail)))
        if not self.has:
            raise SessionNotFound("DELETE: HTTP 404", 404)
        return 200, True


async def test_the_mirror_only_unless_the_serve_is_asked_too() -> None:
    store, serve = DoorStoreTwin(), _Serve(has=True)
    cmd = parse_command("erase", {"command_id": "e1", "reason": "gdpr"}, SID)
    status, body = await run_erase(store, serve, cmd, "alice", DIR)  # type: ignore[arg-type]
    assert status is None and body["upstream_deleted"] is None
    assert body["command_id"] == "e1" and body["session_id"] == SID and body["already_erased"] is False
    assert store.erased == [(SID, "alice", "gdpr")] and serve.calls == []


async def test_the_serve_deletes_too_or_says_it_has_no_such_session() -> None:
    store = DoorStoreTwin()
    cmd = parse_command("erase", {"command_id": "e1", "reason": "r", "upstream": True}, SID)
    status, body = await run_erase(store, _Serve(has=True), cmd, "", None)  # type: ignore[arg-type]
    assert (status, body["upstream_deleted"]) == (200, True)
    assert store.erased == [(SID, "(no subject)", "r")]
    status, body = await run_erase(store, _Serve(has=False), cmd, "bob", DIR)  # type: ignore[arg-type]
    assert (status, body["upstream_deleted"], body["already_erased"]) == (None, False, True)
