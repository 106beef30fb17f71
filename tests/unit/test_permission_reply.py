"""bridge.command_service.permission_reply: a permission reply goes to the runtime where the request is
pending upstream (the v2 per-session list, else the legacy list of the directory, for this session only)."""

from __future__ import annotations

from bridge.command_service.permission_reply import reply_where_pending
from bridge.errors import SessionNotFound
from tests.support.commands_twin import DIR, OTHER, SID, UpstreamCommandsTwin


async def test_the_v2_list_first_then_the_legacy_one() -> None:
    twin = UpstreamCommandsTwin()
    twin.v2_pending = [{"id": "per_v2"}]
    twin.legacy_pending = [{"id": "per_old", "sessionID": SID}]
    assert await reply_where_pending(twin, SID, DIR, "per_v2", "once") == ("v2", 204)  # type: ignore[arg-type]
    assert await reply_where_pending(twin, SID, DIR, "per_old", "reject") == ("legacy", 200)  # type: ignore[arg-type]
    assert twin.calls[-2:] == [("reply_v2", (SID, "per_v2", "once")), ("reply_legacy", ("per_old", "reject"))]


async def test_a_request_pending_nowhere_or_of_another_session_is_none_and_nothing_is_sent() -> None:
    twin = UpstreamCommandsTwin()
    twin.legacy_pending = [{"id": "per_old", "sessionID": OTHER}]
    assert await reply_where_pending(twin, SID, DIR, "per_old", "once") is None  # type: ignore[arg-type]
    assert await reply_where_pending(twin, SID, DIR, "per_none", "once") is None  # type: ignore[arg-type]
    assert twin.count("reply_v2") == twin.count("reply_legacy") == 0


async def test_a_session_the_serve_no_longer_has_is_none() -> None:
    class Gone(UpstreamCommandsTwin):
        async def v2_permissions(self, sid: str, directory: str) -> list[dict[str, object]]:
            raise SessionNotFound("GET: HTTP 404", 404)

    assert await reply_where_pending(Gone(), SID, DIR, "per_1", "once") is None  # type: ignore[arg-type]
