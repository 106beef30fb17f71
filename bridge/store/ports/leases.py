"""The port of leases and cursors (docs/ports.md): who follows a session, with which epoch, and how far its
stored history goes. PostgreSQL: `EventStore` (claim, release, cursor, deletion) and `LeaseStore` (renewal,
hand-off, adoption) of bridge.store; in memory: bridge.store.memory.leases.

The rules both keep (tests/integration/test_port_leases.py runs the same tests on both):
- a claim takes a lease that is free, expired, ours, or whose holder is known dead, and moves the epoch on;
  otherwise `LeaseHeld`. A deleted session is never claimed. The claim answers the stored cursor and status.
- a release gives the lease up only for the epoch that holds it; the cursor stays.
- a heartbeat renews every lease still ours (an expired one nobody took too) and never revives one a peer
  took; a hand-off expires ours at once, so peers adopt them.
- adoption candidates: expired leases (ours too), free sessions last known running, and the leases of live
  holders `holder_dead` judges dead (asked once per holder: a live peer's sessions are not read); never
  deleted sessions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from bridge.errors import LeaseHeld
from bridge.lease import ClaimVerdict, nobody_dead
from bridge.store.codecs import SessionRow


@dataclass(frozen=True)
class ClaimAsk:
    session_id: str
    directory: str | None = None


@dataclass(frozen=True)
class Claim:
    epoch: int
    cursor_seq: int
    verdict: ClaimVerdict
    previous_owner: str | None
    status: str = "idle"  # the stored status and its reason: where the new owner's status machine resumes
    status_reason: str | None = None


ClaimOutcome = Claim | LeaseHeld | Exception


class LeasePort(Protocol):
    async def claim(self, session_id: str, owner: str, directory: str | None = None, *, lease_ttl_s: float = 15.0,
                    holder_dead: Callable[[str], bool] = nobody_dead) -> tuple[int, int]:
        """(epoch, cursor_seq) of the lease taken; `LeaseHeld` when it may not be."""
        ...

    async def claim_many(self, asks: Sequence[ClaimAsk], owner: str, *, lease_ttl_s: float = 15.0,
                         holder_dead: Callable[[str], bool] = nobody_dead) -> list[ClaimOutcome]:
        """`claim` of many sessions (one ask each) at once: each ask's outcome, in the asks' order."""
        ...

    async def release(self, session_id: str, epoch: int) -> None: ...

    async def stored_cursor(self, session_id: str) -> int | None:
        """The session's cursor (None: no such session)."""
        ...

    async def mark_deleted(self, session_id: str) -> None:
        """The deletion tombstone (status `deleted`, terminal), even for a session never seen."""
        ...

    async def heartbeat(self, incarnation_id: str, hostname: str, pid: int, ttl_s: float) -> dict[str, int]:
        """Renew every lease still ours: {session_id: epoch} held."""
        ...

    async def hand_off(self, incarnation_id: str) -> None: ...

    async def adoption_candidates(self, me: str, holder_dead: Callable[[str], bool] = nobody_dead) -> list[SessionRow]:
        """`session_id`, `directory`, `lease_owner`, `lease_expired` of the sessions the sweep may adopt, by
        session_id."""
        ...
