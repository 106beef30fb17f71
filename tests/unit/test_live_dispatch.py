"""The one /api/event dispatch table (bridge.dispatch): where each kind of live traffic goes."""

from __future__ import annotations

from typing import Any

from bridge.dispatch import LiveDispatch
from bridge.events import ChatEvent, normalize, parse_envelope


class Sessions:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        self.calls.append(("warm", session_id, directory, reason))
        return True

    def notify_seen(self, session_id: str, seq: int) -> None:
        self.calls.append(("seen", session_id, seq))

    def notify_legacy_seq(self, session_id: str, seq: int) -> None:
        self.calls.append(("legacy", session_id, seq))

    async def deleted(self, session_id: str) -> None:
        self.calls.append(("deleted", session_id))


class Requests:
    def __init__(self) -> None:
        self.requested = 0

    def request(self) -> None:
        self.requested += 1


def live(type_: str, sid: str | None = "ses_A", seq: int | None = None, **data: Any) -> ChatEvent:
    env: dict[str, Any] = {"id": "evt_1", "type": type_, "location": {"directory": "/work"},
                           "data": {**({"sessionID": sid} if sid else {}), **data}}
    if seq is not None:
        env["durable"] = {"aggregateID": sid, "seq": seq, "version": 1}
    return normalize(parse_envelope(env))


def table() -> tuple[LiveDispatch, Sessions, Requests, Requests]:
    sessions, discovery, resync = Sessions(), Requests(), Requests()
    return LiveDispatch(sessions=sessions, discovery=discovery, resync=resync), sessions, discovery, resync


async def test_a_reconnect_asks_for_discovery_and_a_permission_resync() -> None:
    dispatch, _s, discovery, resync = table()
    await dispatch.on_live_connected()
    assert (discovery.requested, resync.requested) == (1, 1)


async def test_a_v2_event_warms_its_session_and_arms_the_stall_watchdog() -> None:
    dispatch, sessions, _d, _r = table()
    await dispatch.on_live_event(live("session.next.prompted", seq=7, messageID="m"))
    assert sessions.calls == [("warm", "ses_A", "/work", "session.next.prompted"), ("seen", "ses_A", 7)]


async def test_a_legacy_event_with_a_seq_marks_the_mirror_incomplete() -> None:
    dispatch, sessions, _d, _r = table()
    await dispatch.on_live_event(live("message.updated", seq=9))
    assert sessions.calls[1:] == [("legacy", "ses_A", 9)]


async def test_a_deletion_stops_following_and_warms_nothing() -> None:
    dispatch, sessions, _d, _r = table()
    await dispatch.on_live_event(live("session.deleted"))
    assert sessions.calls == [("deleted", "ses_A")]


async def test_traffic_without_a_session_goes_nowhere() -> None:
    dispatch, sessions, _d, _r = table()
    await dispatch.on_live_event(live("server.heartbeat", sid=None))
    assert sessions.calls == []
