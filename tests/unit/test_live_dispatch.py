"""The one /global/event dispatch table (bridge.dispatch): where each kind of live traffic goes."""

from __future__ import annotations

from typing import Any

from bridge.dispatch import LiveDispatch
from bridge.events import ChatEvent, normalize
from bridge.events.syncframes import parse_global_object
from tests.support.fake_upstream import global_frames


class Sessions:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        self.calls.append(("warm", session_id, directory, reason))
        return True

    def notify_seen(self, session_id: str, seq: int) -> None:
        self.calls.append(("seen", session_id, seq))

    def twin(self, session_id: str, env: Any) -> None:
        self.calls.append(("twin", session_id, env.seq))

    def repair_all(self, cause: str) -> None:
        self.calls.append(("repair_all", cause))

    def upstream_status(self, session_id: str, status: Any) -> None:
        self.calls.append(("status", session_id, status.type, status.attempt))

    async def deleted(self, session_id: str) -> None:
        self.calls.append(("deleted", session_id))

    def live_skip_reason(self, session_id: str) -> str | None:
        return "held_elsewhere" if session_id.startswith("ses_peer") else None


class Requests:
    def __init__(self) -> None:
        self.requested = 0

    def request(self) -> None:
        self.requested += 1


def live(type_: str, sid: str | None = "ses_A", seq: int | None = None, **data: Any) -> ChatEvent:
    """The event as `/global/event` gives it: with a seq, the sync twin; without, the bus event."""
    env: dict[str, Any] = {"id": "evt_1", "type": type_, "data": {**({"sessionID": sid} if sid else {}), **data}}
    if seq is not None:
        env["durable"] = {"aggregateID": sid, "seq": seq, "version": 1}
    frame = parse_global_object(global_frames(env, "/work")[-1])
    return normalize(frame.envelope)


def table() -> tuple[LiveDispatch, Sessions, Requests, Requests]:
    sessions, discovery, resync = Sessions(), Requests(), Requests()
    return LiveDispatch(sessions=sessions, discovery=discovery, resync=resync), sessions, discovery, resync


async def test_a_reconnect_asks_for_discovery_and_a_permission_resync() -> None:
    dispatch, _s, discovery, resync = table()
    await dispatch.on_live_connected()
    assert (discovery.requested, resync.requested) == (1, 1)
    assert _s.calls == [("repair_all", "live_reconnect")]  # what was sent meanwhile is in the sync logs


async def test_a_v2_event_warms_its_session_and_arms_the_stall_watchdog() -> None:
    dispatch, sessions, _d, _r = table()
    await dispatch.on_live_event(live("session.next.prompted", seq=7, messageID="m"), "/work")
    assert sessions.calls == [("warm", "ses_A", "/work", "session.next.prompted"), ("seen", "ses_A", 7)]


async def test_the_exact_twin_of_a_legacy_event_goes_to_its_follower() -> None:
    dispatch, sessions, _d, _r = table()
    await dispatch.on_live_event(live("message.updated", seq=9))
    assert sessions.calls[1:] == [("twin", "ses_A", 9)]


async def test_the_bus_copy_of_a_persisted_event_only_warms() -> None:
    dispatch, sessions, _d, _r = table()
    await dispatch.on_live_event(live("message.updated"))
    assert sessions.calls == [("warm", "ses_A", None, "message.updated")]


async def test_session_status_and_idle_reach_the_status_machine() -> None:
    dispatch, sessions, _d, _r = table()
    await dispatch.on_live_event(live("session.status", status={"type": "retry", "attempt": 2, "message": "m",
                                                                "next": 1796111700000}))
    await dispatch.on_live_event(live("session.idle"))
    assert [c for c in sessions.calls if c[0] == "status"] == [("status", "ses_A", "retry", 2),
                                                               ("status", "ses_A", "idle", None)]


async def test_a_deletion_stops_following_and_warms_nothing() -> None:
    dispatch, sessions, _d, _r = table()
    await dispatch.on_live_event(live("session.deleted"))
    assert sessions.calls == [("deleted", "ses_A")]


async def test_traffic_without_a_session_goes_nowhere() -> None:
    dispatch, sessions, _d, _r = table()
    await dispatch.on_live_event(live("server.heartbeat", sid=None))
    assert sessions.calls == []


class Watching:
    """The fan-out's relay as the table asks it: which sessions a local subscriber watches."""

    def __init__(self, *watched: str) -> None:
        self._watched = set(watched)

    def watched(self, session_id: str) -> bool:
        return session_id in self._watched


def test_a_session_held_elsewhere_is_of_no_use_here_unless_a_local_subscriber_watches_it() -> None:
    sessions = Sessions()
    dispatch = LiveDispatch(relay=Watching("ses_peer_watched"), sessions=sessions)  # type: ignore[arg-type]
    assert dispatch.live_skip_reason("ses_peer") == "held_elsewhere"
    assert dispatch.live_skip_reason("ses_peer_watched") is None  # its deltas go to the subscriber
    assert dispatch.live_skip_reason("ses_A") is None
    assert LiveDispatch(relay=Watching()).live_skip_reason("ses_peer") is None  # no sessions part: decode all
    assert sessions.calls == []  # asking warms nothing
