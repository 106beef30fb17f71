"""LeaseKeeper (heartbeat → lost leases, strays) and Sweep (adoption, idle release) against the lease
store's in-memory twin and a stand-in of the warm-session registry; the clock is a variable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from structlog.testing import capture_logs

from bridge.sessions.keeper import LeaseKeeper
from bridge.sessions.status_machine import Status
from bridge.sessions.sweep import Sweep
from bridge.store.memory import MemoryLeaseStore

ME = "host:1:me"


class Registry:
    """The registry's view of warm sessions, in memory: {session: (epoch, claimed_at, last_activity)}."""

    def __init__(self, warm: dict[str, tuple[int | None, float | None, float]]) -> None:
        self.warm_ = {sid: SimpleNamespace(epoch=e, claimed_at=c, last_activity=a, follower=None)
                      for sid, (e, c, a) in warm.items()}
        self.subs: dict[str, int] = {}
        self.deleted: set[str] = set()
        self.calls: list[tuple[Any, ...]] = []

    def _owned(self) -> list[tuple[str, Any]]:
        return [(sid, w) for sid, w in self.warm_.items() if w.epoch is not None]

    # The registry's questions as walks (the real one answers them from its indexes, property-tested against
    # walks in test_lease_index.py and test_idle_due.py).
    def not_renewed(self, held: dict[str, int]) -> list[str]:
        return [sid for sid, w in self._owned() if held.get(sid) != w.epoch]

    def strays(self, held: dict[str, int]) -> list[str]:
        return [sid for sid in held if sid not in self.warm_]

    def idle_owned(self, horizon: float) -> list[tuple[str, Any]]:
        return [(sid, w) for sid, w in self._owned() if w.last_activity <= horizon]

    def get(self, session_id: str) -> Any:
        return self.warm_.get(session_id)

    def lease_lost(self, session_id: str) -> None:
        self.calls.append(("lease_lost", session_id))

    async def release_lease(self, session_id: str, epoch: int) -> None:
        self.calls.append(("release_lease", session_id, epoch))

    def is_deleted(self, session_id: str) -> bool:
        return session_id in self.deleted

    def subscribers(self, session_id: str) -> int:
        return self.subs.get(session_id, 0)

    def warm(self, session_id: str, directory: str | None = None, reason: str = "") -> bool:
        self.calls.append(("warm", session_id, reason))
        return True

    async def release(self, session_id: str, reason: str = "request") -> None:
        self.calls.append(("release", session_id, reason))


NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Leases(MemoryLeaseStore):
    """The lease store's in-memory twin (bridge.store.memory): `held` leases are ours,
    `candidates` rows as other incarnations left them; `failing`: the database is away."""

    def __init__(self, held: dict[str, int] | None = None, candidates: list[Candidate] | None = None) -> None:
        super().__init__(clock=lambda: NOW)
        self.failing = False
        for sid, epoch in (held or {}).items():
            self.put(sid, lease_owner=ME, lease_epoch=epoch, lease_expires_at=NOW + timedelta(seconds=5))
        for sid, owner, expired in candidates or []:
            if owner is None:
                self.put(sid, status="running")  # last known running, nobody follows it
            else:
                self.put(sid, lease_owner=owner, lease_expires_at=NOW + timedelta(seconds=-1 if expired else 5))

    async def heartbeat(self, incarnation_id: str, hostname: str, pid: int, ttl_s: float) -> dict[str, int]:
        if self.failing:
            raise ConnectionError("database away (test)")
        return await super().heartbeat(incarnation_id, hostname, pid, ttl_s)


Candidate = tuple[str, str | None, bool]


def candidate(session_id: str, owner: str | None, expired: bool) -> Candidate:
    return session_id, owner, expired


def keeper(leases: Leases, registry: Registry, now: float = 100.0) -> LeaseKeeper:
    return LeaseKeeper(leases, registry, ME, "host", lease_ttl_s=15, interval_s=5, clock=lambda: now)


async def test_a_lease_the_heartbeat_could_not_renew_stops_its_follower() -> None:
    registry = Registry({"ses_taken": (3, 50.0, 0.0), "ses_kept": (4, 50.0, 0.0), "ses_new": (1, 100.0, 0.0)})
    await keeper(Leases(held={"ses_kept": 4}), registry).beat()
    # ses_new was claimed while the heartbeat ran: its renewal is not judged yet.
    assert registry.calls == [("lease_lost", "ses_taken")]


async def test_a_lease_we_hold_without_a_follower_is_given_back() -> None:
    registry = Registry({"ses_A": (2, 50.0, 0.0)})
    await keeper(Leases(held={"ses_A": 2, "ses_stray": 9}), registry).beat()
    assert registry.calls == [("release_lease", "ses_stray", 9)]


async def test_a_failed_heartbeat_stops_nothing() -> None:
    registry = Registry({"ses_A": (2, 50.0, 0.0)})
    leases = Leases()
    leases.failing = True
    with capture_logs() as logs:
        await keeper(leases, registry).beat()
    # Logged as the database lost (once, not per beat: bridge.outage), with what failed.
    assert registry.calls == [] and [e["event"] for e in logs] == ["dependency_lost"]
    assert "lease_heartbeat_failed" in logs[0]["error"]


class Activity:
    def __init__(self, statuses: dict[str, Status], active: set[str] | None = None) -> None:
        self.statuses, self.active = statuses, active or set()

    def status(self, session_id: str) -> Status | None:
        return self.statuses.get(session_id)

    def is_active(self, session_id: str) -> bool:
        return session_id in self.active


def sweep(leases: Leases, registry: Registry, activity: Activity, dead: set[str] | None = None) -> Sweep:
    return Sweep(leases, registry, activity, ME, holder_dead=lambda owner: owner in (dead or set()), idle_ttl_s=600,
                 interval_s=5, clock=lambda: 1000.0)


async def test_orphans_and_dead_holders_are_adopted_and_live_peers_deleted_or_warm_sessions_are_not() -> None:
    candidates = [candidate("ses_expired", "peer:1:a", True), candidate("ses_dead", "host:2:b", False),
                  candidate("ses_live", "peer:3:c", False), candidate("ses_running", None, False),
                  candidate("ses_deleted", "peer:1:a", True), candidate("ses_warm", "peer:1:a", True)]
    registry = Registry({"ses_warm": (None, None, 0.0)})
    registry.deleted.add("ses_deleted")
    await sweep(Leases(candidates=candidates), registry, Activity({}), dead={"host:2:b"}).adopt_orphans()
    # in session id order, as the store lists them
    assert registry.calls == [("warm", "ses_dead", "orphan_holder_dead"), ("warm", "ses_expired", "orphan"),
                              ("warm", "ses_running", "last_running")]


async def test_only_idle_unsubscribed_inactive_sessions_are_released() -> None:
    old, recent = 0.0, 900.0  # the clock says 1000, idle TTL 600
    registry = Registry({"ses_idle": (1, 0.0, old), "ses_recent": (1, 0.0, recent), "ses_subscribed": (1, 0.0, old),
                         "ses_running": (1, 0.0, old), "ses_active": (1, 0.0, old), "ses_resuming": (1, 0.0, old)})
    registry.subs["ses_subscribed"] = 1
    activity = Activity({"ses_idle": Status.IDLE, "ses_recent": Status.IDLE, "ses_subscribed": Status.IDLE,
                         "ses_running": Status.RUNNING, "ses_active": Status.IDLE}, active={"ses_active"})
    await sweep(Leases(), registry, activity).release_idle()
    assert registry.calls == [("release", "ses_idle", "idle")]
