"""Lease decisions (pure): may this incarnation take a session's lease, and is a lease orphaned?

A lease is `(owner, epoch, expires_at)` on the session row. The owner renews `expires_at` with its
heartbeat; the epoch is the fencing token every write batch presents (docs/lifecycle.md, "Ownership:
incarnations, leases, fencing"). Taking a lease always moves the epoch on — even when we already hold
it — so that an older follower of the same session, in this process or another, is fenced off the
moment the new one starts (the supersede race).

Time comes in as an argument (the database's `now()`, one clock for every replica), never read here.
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class LeaseView:
    owner: str | None
    epoch: int
    expires_at: datetime | None
    deleted: bool = False


class ClaimVerdict(enum.Enum):
    FREE = "free"  # nobody holds it (never claimed, or released)
    EXPIRED = "expired"  # the holder stopped renewing: dead, paused or partitioned
    HOLDER_DEAD = "holder_dead"  # the holder is a process of this host that no longer exists
    OURS = "ours"  # we hold it: a new follower supersedes our old one
    HELD = "held"  # another live incarnation holds it: refuse
    DELETED = "deleted"  # the session is deleted upstream: nobody follows it again

    @property
    def takes(self) -> bool:
        return self in _TAKING


_TAKING = frozenset({ClaimVerdict.FREE, ClaimVerdict.EXPIRED, ClaimVerdict.HOLDER_DEAD, ClaimVerdict.OURS})


def nobody_dead(_owner: str) -> bool:
    """The default `holder_dead`: no holder is known dead."""
    return False


def is_expired(lease: LeaseView, now: datetime) -> bool:
    """A held lease without an expiry was never renewed by a heartbeat (rows from before leases
    expired): treat it as expired rather than held forever."""
    return lease.owner is not None and (lease.expires_at is None or lease.expires_at <= now)


def decide_claim(
    lease: LeaseView, me: str, now: datetime, holder_dead: Callable[[str], bool] = lambda _owner: False
) -> ClaimVerdict:
    if lease.deleted:
        return ClaimVerdict.DELETED
    if lease.owner is None:
        return ClaimVerdict.FREE
    if lease.owner == me:
        return ClaimVerdict.OURS
    if is_expired(lease, now):
        return ClaimVerdict.EXPIRED
    if holder_dead(lease.owner):
        return ClaimVerdict.HOLDER_DEAD
    return ClaimVerdict.HELD


@dataclass(frozen=True)
class IncarnationId:
    hostname: str
    pid: int


def parse_incarnation(owner: str) -> IncarnationId | None:
    """`host:pid:random` (bridge.daemon.new_incarnation_id); None for anything else."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return IncarnationId(parts[0], int(parts[1]))


def local_holder_dead(owner: str, my_hostname: str, pid_alive: Callable[[int], bool]) -> bool:
    """True only when certain: the holder ran on this host and its pid no longer exists. A reused pid
    looks alive (we then wait for expiry: safe). Off by default across hosts, since hostnames may repeat
    (BRIDGE_LEASE_PID_PROBE)."""
    inc = parse_incarnation(owner)
    if inc is None or inc.hostname != my_hostname:
        return False
    return not pid_alive(inc.pid)


@dataclass(frozen=True)
class HolderProbe:
    """`holder_dead` for claims and adoption: `local_holder_dead` when the pid probe is on, else never."""

    enabled: bool
    hostname: str
    pid_alive: Callable[[int], bool]

    def __call__(self, owner: str) -> bool:
        return self.enabled and local_holder_dead(owner, self.hostname, self.pid_alive)


def adoption_reason(owner: str | None, expired: bool, holder_dead: Callable[[str], bool]) -> str | None:
    """Why the sweep should warm a session it does not follow, or None. `owner` None means the lease is
    free and the session was last known running (its previous owner released it mid-turn, e.g. at a
    clean shutdown before leases were handed off)."""
    if owner is None:
        return "last_running"
    if expired:
        return "orphan"
    if holder_dead(owner):
        return "orphan_holder_dead"
    return None


# A host's BRIDGE_WORKERS (docs/operations.md "Workers"): every worker sees every session (the parent's
# one /global/event), and the first claim to commit wins. Left at that, the first worker up claims them all.
# Each session has a home worker (a stable hash of its id) that claims at once; the others wait
# `WORKER_CLAIM_DEFER_S` before trying, so they take a session only when its home worker did not (dead,
# restarting, or slow): nothing waits on a worker that is not there, and nothing is claimed twice. 5 s, not
# 1 s: workers start seconds apart on a loaded host, and with 1 s the first one up took all 1,000 sessions
# in 2 of 7 bench runs; a session whose home worker is down is mirrored 5 s later, from its stored cursor.
WORKER_CLAIM_DEFER_S = 5.0


def home_worker(session_id: str, workers: int) -> int:
    """The worker (0 .. workers-1) that claims `session_id` first; the same in every process."""
    return zlib.crc32(session_id.encode()) % workers if workers > 1 else 0


def claim_delay(session_id: str, index: int, workers: int, defer_s: float = WORKER_CLAIM_DEFER_S) -> float:
    """Seconds worker `index` of `workers` waits before claiming `session_id`: 0 at its home worker."""
    return 0.0 if home_worker(session_id, workers) == index else defer_s


# How long a worker leaves alone a session another worker of its host holds (its claim was refused). A live
# peer keeps a session until it releases it or dies, and a dead holder's sessions are adopted by the sweep,
# which no refusal holds back (reasons `orphan`, `orphan_holder_dead`); a released session is claimed again by
# whoever sees its next event (the worker that released it has no refusal; one that died after releasing is
# started again, and its discovery warms what has news). Asking again every sweep interval only re-warmed (a
# claim transaction, a task) and re-decoded (docs/operations.md "Workers": a session refused is one whose
# frames are dropped undecoded) every active session of the peer's, for nothing; every 5 minutes, a second of
# a session's frames in 300 is decoded for the re-claim.
PEER_WORKER_REFUSAL_S = 300.0


def refusal_s(me: str, holder: str | None, sweep_interval_s: float, workers: bool) -> float:
    """How long a session whose claim `holder` refused is not asked again (insistent reasons aside): a sweep
    interval, or `PEER_WORKER_REFUSAL_S` when we are one of a host's workers and the holder runs on our host."""
    mine, theirs = parse_incarnation(me), parse_incarnation(holder or "")
    if workers and mine is not None and theirs is not None and mine.hostname == theirs.hostname:
        return max(PEER_WORKER_REFUSAL_S, sweep_interval_s)
    return sweep_interval_s
