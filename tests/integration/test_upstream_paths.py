"""What reaches the upstream's wire: a session id can never point a request at another route.

Against the fake upstream (a real aiohttp server recording every raw request path) through the real
transport; ids of the wrong shape are refused before a request, and what is sent is never re-encoded or
normalized on the way."""

from __future__ import annotations

import pytest

from bridge.errors import InvalidSessionId, SessionNotFound
from bridge.upstream.client import UpstreamClient
from bridge.upstream.durable import DurableFollower
from bridge.upstream.follower import FollowerExit
from tests.support.fake_upstream import FakeUpstream
from tests.support.memory_upstream import MemorySink

HOSTILE = ["x/../ses_REAL", "../ses_REAL", "ses_REAL/../ses_REAL", "ses_REAL#", "ses_REAL?after=0", "..",
           "ses_REAL%2F..", "ses_REAL\x00"]


@pytest.mark.parametrize("sid", HOSTILE)
async def test_a_hostile_id_reaches_no_route_of_another_session(fake: FakeUpstream, fake_client: UpstreamClient,
                                                               sid: str) -> None:
    fake.add_session("ses_REAL")
    await fake.append("ses_REAL", "session.next.text.started", {"textID": "t"}, live=False)
    fake.permissions["ses_REAL"] = [{"id": "per_1", "sessionID": "ses_REAL"}]

    assert await fake_client.pending_permissions(sid) == []
    with pytest.raises(InvalidSessionId):
        await fake_client.history(sid, 0)
    follower = DurableFollower(sid, fake_client, MemorySink(), 0)
    assert await follower.run() is FollowerExit.GONE

    assert fake.request_paths == []


async def test_valid_ids_are_sent_as_is_and_encoded_paths_are_not_normalized(fake: FakeUpstream,
                                                                              fake_client: UpstreamClient) -> None:
    fake.add_session("ses_REAL")
    await fake_client.history("ses_REAL", 0, 5)
    with pytest.raises(SessionNotFound):  # the fake decodes %2F into one segment: no such session
        async with fake_client.open_stream("/api/session/ses_A%2F..%2Fses_REAL/event", {"after": "0"}):
            pass
    assert fake.request_paths == ["/api/session/ses_REAL/history?after=0&limit=5",
                                  "/api/session/ses_A%2F..%2Fses_REAL/event?after=0"]
