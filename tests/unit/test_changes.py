"""ChangeFollower and LiveFollower (bridge.sessions.changes) over the driver port's in-memory twin: a sweep
on every (re)connect warms every session, a hint warms its session; live-only events are normalized and
handed to the dispatch table, which hears of every (re)connect."""

from __future__ import annotations

from bridge.events import ChatEvent, Kind
from bridge.sessions.changes import ChangeFollower, LiveFollower
from bridge.upstream.driver_twin import MemoryDriver
from tests.support.tasks import in_background
from tests.support.waiting import wait_until


class Warmer:
    def __init__(self) -> None:
        self.warmed: list[tuple[str, str | None, str]] = []

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        self.warmed.append((session_id, directory, reason))
        return True


async def test_a_sweep_at_every_connect_and_a_hint_per_event_warm_their_sessions() -> None:
    driver, warmer = MemoryDriver(2), Warmer()
    driver.add_session("ses_A", "/work/a")
    follower = ChangeFollower(driver, warmer, reconnect_min_s=0.001, reconnect_max_s=0.01)
    async with in_background(follower.run()):
        await wait_until(lambda: follower.connected.is_set() and follower.sweeps == 1, 5, 0.001, message="swept")
        assert warmer.warmed == [("ses_A", "/work/a", "sweep")]
        driver.add_session("ses_B")
        await driver.append("ses_B", "session.text.ended", {"assistantMessageID": "m", "ordinal": 0, "text": "x"})
        await wait_until(lambda: ("ses_B", None, "hint") in warmer.warmed, 5, 0.001, message="hinted")
        driver.drop_changes()  # the stream ends: read again, and what was not hinted meanwhile is swept
        await wait_until(lambda: follower.sweeps == 2, 5, 0.001, message="swept again")
        assert warmer.warmed[-2:] == [("ses_A", "/work/a", "sweep"), ("ses_B", None, "sweep")]


class Handler:
    def __init__(self) -> None:
        self.connected = 0
        self.events: list[ChatEvent] = []

    async def on_live_connected(self) -> None:
        self.connected += 1

    async def on_live_event(self, ev: ChatEvent, directory: str | None = None) -> None:
        self.events.append(ev)


async def test_live_events_are_normalized_and_handed_on_after_the_connect_is_told() -> None:
    driver, handler = MemoryDriver(2), Handler()
    live = LiveFollower(driver, handler, reconnect_min_s=0.001, reconnect_max_s=0.01)
    async with in_background(live.run()):
        await wait_until(lambda: handler.connected == 1 and live.connections == 1, 5, 0.001, message="connected")
        driver.publish_live({"id": "evt_1", "type": "session.text.delta",
                             "data": {"sessionID": "ses_A", "assistantMessageID": "m", "ordinal": 0, "delta": "h"}})
        await wait_until(lambda: len(handler.events) == 1, 5, 0.001, message="handed on")
    ev = handler.events[0]
    assert ev.session_id == "ses_A" and ev.kind == Kind.DELTA_TEXT
