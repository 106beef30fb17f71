"""Many lease claims in one transaction (pure): which waiting claims go together, and what each one gets.

A batch (bridge.store.chat_sessions.claims) claims up to a few hundred sessions in one transaction — rows
ensured, locked in `session_id` order, taken in one UPDATE — with exactly the semantics of one claim each
(bridge.lease.decide_claim on every locked row): a caller gets its own `Claim` or its own `LeaseHeld`, and
every taken lease moves its epoch on (docs/lifecycle.md "Warm-up").

One session appears at most once in a batch. A second claim of the same session (a new follower that
supersedes an older one of ours) waits for the next batch, so that it sees the first one's epoch and moves
it on again, as two claims one after the other would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from bridge.lease import ClaimVerdict, LeaseView, decide_claim
from bridge.store.ports.leases import ClaimAsk as ClaimAsk  # re-exported: the record is the port's


class OfSession(Protocol):
    @property
    def session_id(self) -> str: ...


A = TypeVar("A", bound=OfSession)


def storable_directory(directory: str | None) -> str | None:
    """The directory is only a hint: one PostgreSQL text cannot hold (a NUL) is dropped, not refused."""
    return None if directory is not None and "\x00" in directory else directory


def next_batch(waiting: Sequence[A], max_batch: int) -> tuple[list[A], list[A]]:
    """(this batch, the rest): the oldest waiting claims, at most `max_batch`, one per session; the rest
    keep their order."""
    if max_batch < 1:
        raise ValueError("max_batch must be at least 1")
    taken: list[A] = []
    later: list[A] = []
    sessions: set[str] = set()
    for ask in waiting:
        if len(taken) < max_batch and ask.session_id not in sessions:
            sessions.add(ask.session_id)
            taken.append(ask)
        else:
            later.append(ask)
    return taken, later


def sorted_rows(asks: Sequence[ClaimAsk]) -> tuple[list[str], list[str | None]]:
    """The batch's rows to ensure, as parallel arrays in `session_id` order: rows are inserted (and so
    locked) in the order every multi-row statement of the store locks them, so two batches, a group commit
    or a lease renewal never deadlock (bridge.store.writes.transaction)."""
    ordered = sorted(asks, key=lambda a: a.session_id)
    if len({a.session_id for a in ordered}) != len(ordered):
        raise ValueError("a session appears twice in one claim batch")
    return [a.session_id for a in ordered], [storable_directory(a.directory) for a in ordered]


def decide_batch(asks: Sequence[ClaimAsk], locked: Mapping[str, LeaseView], owner: str, now: datetime,
                 holder_dead: Callable[[str], bool]) -> dict[str, ClaimVerdict]:
    """Each asked session's verdict on its locked lease (by the database clock `now`). A session whose row
    is missing (it was just ensured: only a concurrent removal) is left out; its caller gets an error."""
    return {a.session_id: decide_claim(locked[a.session_id], owner, now, holder_dead)
            for a in asks if a.session_id in locked}
