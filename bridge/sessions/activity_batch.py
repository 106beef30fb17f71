"""How a batch of the activity tracker's queued writes goes to the database (pure; bridge.sessions.activity,
docs/lifecycle.md "Writes in batches").

The tracker queues, in the order they happened, status transitions, seq gaps and titles of the sessions
it owns. Its writer takes everything queued at once and plans it here:
- titles: the last one of each session (only a change is written anyway);
- statuses: every transition, none coalesced (each is a `NOTIFY` subscribers see, with its version), in
  *rounds*: round k holds each session's k-th transition of the batch, so one statement per round writes
  many sessions and a session's transitions still commit in their order;
- gaps: in order, one by one (rare: a hole of the sync log itself);
- `deleted` is never written here (the store recorded the tombstone), only logged and counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bridge.sessions.status_machine import Status, Transition


@dataclass(frozen=True)
class Gap:
    from_seq: int
    to_seq: int


@dataclass(frozen=True)
class Title:
    title: str


Write = Transition | Gap | Title
StatusWrite = tuple[str, str, str | None]  # session id, status, reason
StatusRounds = Sequence[Sequence[StatusWrite]]


@dataclass
class WritePlan:
    gaps: list[tuple[str, Gap]] = field(default_factory=list)
    titles: list[tuple[str, str]] = field(default_factory=list)
    status_rounds: list[list[StatusWrite]] = field(default_factory=list)
    # every transition in order with the round that writes it (None: `deleted`, not written)
    transitions: list[tuple[str, Transition, int | None]] = field(default_factory=list)


def plan_writes(batch: Iterable[tuple[str, Write]]) -> WritePlan:
    plan = WritePlan()
    titles: dict[str, str] = {}
    seen: dict[str, int] = {}
    for sid, item in batch:
        if isinstance(item, Gap):
            plan.gaps.append((sid, item))
        elif isinstance(item, Title):
            titles[sid] = item.title
        elif item.status is Status.DELETED:
            plan.transitions.append((sid, item, None))
        else:
            k = seen.get(sid, 0)
            seen[sid] = k + 1
            if k == len(plan.status_rounds):
                plan.status_rounds.append([])
            plan.status_rounds[k].append((sid, item.status.value, item.reason))
            plan.transitions.append((sid, item, k))
    plan.titles = list(titles.items())
    return plan
