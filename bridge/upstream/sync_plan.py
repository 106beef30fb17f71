"""Which sessions' sync logs one `POST /sync/history` asks for, and whose items are whose (pure; no I/O).

An answer holds every aggregate the body names after its cutoff, and the *whole* log of every aggregate it
does not name (docs/upstream.md §14). So a body names the sessions whose log is wanted with their cursor and
known others with `SYNC_CUTOFF_MAX` (left out). The serve takes at most 996 named aggregates in one body
(SQLite's expression depth, §14), so a body names at most `MAX_NAMED`: the wanted ones, then the known
sessions with the largest logs (`known` maps a session to the highest seq seen of it); the logs of the rest
come back whole and are dropped. Naming many wanted sessions in one body costs the same request bytes as
naming one, so a repair of 1,000 sessions is a few calls instead of 1,000 (docs/mirror.md "Sync-log repair,
batched").

`plan_call` takes the first wanted sessions that fit one call: at most `max_sessions`, at most `MAX_NAMED`
named, a body of at most `max_request_bytes` (always at least one session, so planning makes progress), and
each session once (a session wanted twice, with two cursors, goes into a later call). A cursor below 0
(`FROM_START`) leaves the session unnamed: its log comes back whole from seq 0. `split_answer` hands each
wanted session the items of its aggregate above its own cursor, in the answer's order.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

SYNC_CUTOFF_MAX = 2**53 - 1
_MAX_DIGITS = len(str(SYNC_CUTOFF_MAX))
# The serve answered 996 named aggregates and refused 997 (HTTP 500; docs/upstream.md §14): its condition is
# one OR chain, one level per name, and nothing else of the query grows. 990 keeps six levels for a serve
# that adds a condition; every name it cannot take is a whole log in each answer (at 1,000 known sessions,
# 960 names meant 40 whole logs in every answer).
MAX_NAMED = 990
T = TypeVar("T")


@dataclass(frozen=True)
class Wanted:
    session_id: str
    after: int  # exclusive; below 0: from seq 0 (the session is not named)


def _entry_bytes(session_id: str, digits: int) -> int:
    return len(session_id) + 4 + digits  # `"sid":N,` (ids are ASCII: bridge.ids)


def leave_out(known: Mapping[str, int], asked: Collection[str], n: int) -> list[str]:
    """The `n` known sessions with the largest logs that are not asked for (named with the largest
    cutoff, so their logs stay out of the answer)."""
    if n <= 0:
        return []
    return heapq.nlargest(n, (k for k in known if k not in asked), key=known.__getitem__)


def plan_call(wanted: Sequence[Wanted], known: Mapping[str, int], *, max_sessions: int,
              max_request_bytes: int, max_named: int = MAX_NAMED) -> tuple[list[Wanted], list[Wanted]]:
    """The wanted sessions of the next call (in their order) and those left for later calls. The bytes
    counted are those of the wanted entries plus the left-out names the body will carry."""
    filler = _entry_bytes("ses_" + "x" * 26, _MAX_DIGITS)  # a left-out name, as long as an upstream id
    taken: list[Wanted] = []
    later: list[Wanted] = []
    names: set[str] = set()
    named = 0
    size = 2
    for w in wanted:
        is_named = w.after >= 0
        if w.session_id in names or len(taken) >= max_sessions or (is_named and named >= max_named):
            later.append(w)
            continue
        grown = size + (_entry_bytes(w.session_id, len(str(w.after))) if is_named else 0)
        if taken and grown + filler * min(len(known), max_named - named - is_named) > max_request_bytes:
            later.append(w)
            continue
        taken.append(w)
        names.add(w.session_id)
        named += is_named
        size = grown
    return taken, later


def body(call: Sequence[Wanted], known: Mapping[str, int], max_named: int = MAX_NAMED,
         unnamed: Collection[str] = ()) -> dict[str, int]:
    """The request body of one planned call (each session of `call` at most once): the wanted sessions
    with their cursor, then as many known others as `max_named` allows, largest logs first, except those
    that must stay `unnamed` (their whole log is wanted: the riders of bridge.upstream.sync_batch)."""
    asked = {w.session_id for w in call} | set(unnamed)
    out = {w.session_id: w.after for w in call if w.after >= 0}
    for k in leave_out(known, asked, max_named - len(out)):
        out[k] = SYNC_CUTOFF_MAX
    return out


def body_bytes(b: dict[str, int]) -> bytes:
    return json.dumps(b, separators=(",", ":")).encode()


@dataclass
class Split:
    """An answer cut per wanted session (same order as the call), plus what belongs to none of them."""

    items: list[list[Any]]
    seen: dict[str, int] = field(default_factory=dict)  # every aggregate of the answer: its highest seq
    unattributed: list[Any] = field(default_factory=list)  # not an object, or no string `aggregate_id`


def split_answer(items: Sequence[Any], call: Sequence[Wanted]) -> Split:
    index = {w.session_id: i for i, w in enumerate(call)}
    out = Split([[] for _ in call])
    for item in items:
        agg = item.get("aggregate_id") if isinstance(item, dict) else None
        if not isinstance(agg, str):
            out.unattributed.append(item)
            continue
        seq = item.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool) and seq > out.seen.get(agg, -1):
            out.seen[agg] = seq
        i = index.get(agg)
        if i is None:
            continue
        if isinstance(seq, int) and not isinstance(seq, bool) and seq <= call[i].after:
            continue  # asked for from a cursor above it (the ingest drops it anyway)
        out.items[i].append(item)
    return out


def halves(call: Sequence[T]) -> tuple[list[T], list[T]]:
    """A call whose answer was over the body bound is asked again as two (one session: cannot split)."""
    mid = (len(call) + 1) // 2
    return list(call[:mid]), list(call[mid:])


class ItemPace:
    """What the serve spends answering, paced: every call's answer (items of every aggregate, the whole
    logs of the sessions it could not name included) is a debt paid at `items_per_s`; the next call waits
    until it is paid, at most `max_wait_s`, and the repairs asked meanwhile go into that one call
    (docs/mirror.md "What a repair costs"). `items_per_s` of 0 or less: no pacing."""

    def __init__(self, items_per_s: float, *, max_wait_s: float = 10.0) -> None:
        self._rate = items_per_s
        self._max_wait = max_wait_s
        self._debt = 0.0
        self._at = 0.0

    def spent(self, items: int, now: float) -> None:
        """An answer of `items` was read. The debt never exceeds `max_wait_s` of budget: one huge answer
        holds the next call at most that long, not for as long as it would take to pay it."""
        self._debt = min(self._owed(now) + items, self._rate * self._max_wait) if self._rate > 0 else 0.0
        self._at = now

    def _owed(self, now: float) -> float:
        if self._rate <= 0:
            return 0.0
        return max(0.0, self._debt - (now - self._at) * self._rate)

    def wait(self, now: float) -> float:
        """Seconds the next call waits from `now`."""
        if self._rate <= 0:
            return 0.0
        return min(self._max_wait, self._owed(now) / self._rate)
