"""ActivePoller (bridge.sessions.poller): `GET /api/session/active` → the status machines, and a session
listed active that we do not follow is warmed; a poll the serve cannot answer changes nothing. The serve is
a scripted MockTransport, the status machines the real ActivityTracker over the lease store's twin."""

from __future__ import annotations

from bridge.sessions.activity import ActivityTracker
from bridge.sessions.poller import ActivePoller
from bridge.sessions.status_machine import Status
from bridge.store.chat_sessions import TurnState
from bridge.upstream.client import UpstreamClient
from bridge.upstream.transport import MockTransport, Request, Response
from tests.support.memory_upstream import json_response
from tests.support.warm_registry import ME, Clock, Leases


class Serve:
    def __init__(self) -> None:
        self.active: dict[str, object] = {}
        self.failing = False
        self.transport = MockTransport(self.handle)

    async def handle(self, request: Request) -> Response:
        assert request.path == "/api/session/active"
        if self.failing:
            return json_response(503, {"_tag": "Unavailable", "message": "restarting"})
        return json_response(200, {"data": self.active})  # /api/* bodies are {data: …} (docs/upstream.md §6)


class Warmer:
    def __init__(self) -> None:
        self.warmed: list[tuple[str, str]] = []

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        self.warmed.append((session_id, reason))
        return True


async def test_listed_sessions_are_warmed_and_a_running_turn_no_longer_listed_ends() -> None:
    serve, clock, warmer = Serve(), Clock(10.0), Warmer()
    activity = ActivityTracker(Leases(), ME, 3600.0, clock=clock)
    await activity.resume("ses_A", 3, TurnState("running", None, []))
    poller = ActivePoller(UpstreamClient("http://serve.test", transport=serve.transport), activity, warmer,
                          poll_s=1.0, idle_poll_s=30.0, clock=clock)
    serve.active = {"ses_A": {"type": "busy"}, "ses_B": {"type": "busy"}}
    await poller.poll_once()
    assert sorted(warmer.warmed) == [("ses_A", "active"), ("ses_B", "active")]
    assert activity.is_active("ses_A") and activity.status("ses_A") is Status.RUNNING
    serve.active = {}
    clock.now = 100.0  # well past the settle time
    await poller.poll_once()
    clock.now = 200.0
    await poller.poll_once()
    assert not activity.is_active("ses_A") and activity.status("ses_A") is Status.IDLE


async def test_a_poll_the_serve_cannot_answer_changes_nothing() -> None:
    serve, clock, warmer = Serve(), Clock(10.0), Warmer()
    activity = ActivityTracker(Leases(), ME, 3600.0, clock=clock)
    await activity.resume("ses_A", 3, TurnState("running", None, []))
    poller = ActivePoller(UpstreamClient("http://serve.test", transport=serve.transport), activity, warmer,
                          poll_s=1.0, idle_poll_s=30.0, clock=clock)
    serve.failing = True
    clock.now = 100.0
    await poller.poll_once()
    assert warmer.warmed == [] and activity.status("ses_A") is Status.RUNNING
