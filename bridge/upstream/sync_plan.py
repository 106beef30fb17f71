"""Which sessions' sync logs one `POST /sync/history` asks for, and whose items are whose (pure; no I/O).

An answer holds every aggregate the body names after its cutoff, and the *whole* log of every aggregate it
does not name (docs/upstream.md §14). So a body names every session the client knows: the ones whose log
is wanted with their cursor, all others with `SYNC_CUTOFF_MAX` (left out). Naming many wanted sessions in
one body therefore costs the same request bytes as naming one, and a repair of 1,000 sessions is a handful
of calls instead of 1,000 bodies of every known id (docs/mirror.md "Sync-log repair, batched").

`plan_call` takes the first wanted sessions that fit one call: at most `max_sessions`, a body of at most
`max_request_bytes` (always at least one session, so planning makes progress), and each session once (a
session wanted twice, with two cursors, goes into a later call). A cursor below 0 (`FROM_START`) leaves the
session unnamed: its log comes back whole from seq 0. `split_answer` hands each wanted session the items
of its aggregate above its own cursor, in the answer's order.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

SYNC_CUTOFF_MAX = 2**53 - 1
_MAX_DIGITS = len(str(SYNC_CUTOFF_MAX))
T = TypeVar("T")


@dataclass(frozen=True)
class Wanted:
    session_id: str
    after: int  # exclusive; below 0: from seq 0 (the session is not named)


def _entry_bytes(session_id: str, digits: int) -> int:
    return len(session_id) + 4 + digits  # `"sid":N,` (ids are ASCII: bridge.ids)


def known_bytes(known: Collection[str]) -> int:
    """The body that names every known session with the largest cutoff (`{}` included)."""
    return 2 + sum(_entry_bytes(k, _MAX_DIGITS) for k in known)


def _delta(w: Wanted, known: Collection[str]) -> int:
    """How the body grows when `w` is asked for instead of left out."""
    named = _entry_bytes(w.session_id, len(str(w.after))) if w.after >= 0 else 0
    return named - (_entry_bytes(w.session_id, _MAX_DIGITS) if w.session_id in known else 0)


def plan_call(wanted: Sequence[Wanted], known: Collection[str], *, max_sessions: int,
              max_request_bytes: int) -> tuple[list[Wanted], list[Wanted]]:
    """The wanted sessions of the next call (in their order) and those left for later calls."""
    size = known_bytes(known)
    taken: list[Wanted] = []
    later: list[Wanted] = []
    names: set[str] = set()
    for w in wanted:
        if w.session_id in names or len(taken) >= max_sessions:
            later.append(w)
            continue
        grown = size + _delta(w, known)
        if taken and grown > max_request_bytes:
            later.append(w)
            continue
        taken.append(w)
        names.add(w.session_id)
        size = grown
    return taken, later


def body(call: Sequence[Wanted], known: Collection[str]) -> dict[str, int]:
    """The request body of one planned call (each session of `call` at most once)."""
    asked = {w.session_id for w in call}
    out = {k: SYNC_CUTOFF_MAX for k in known if k not in asked}
    for w in call:
        if w.after >= 0:
            out[w.session_id] = w.after
    return out


def body_bytes(b: dict[str, int]) -> bytes:
    return json.dumps(b, separators=(",", ":")).encode()


@dataclass
class Split:
    """An answer cut per wanted session (same order as the call), plus what belongs to none of them."""

    items: list[list[Any]]
    foreign: set[str] = field(default_factory=set)  # aggregates of other sessions (to name from now on)
    unattributed: list[Any] = field(default_factory=list)  # not an object, or no string `aggregate_id`


def split_answer(items: Sequence[Any], call: Sequence[Wanted]) -> Split:
    index = {w.session_id: i for i, w in enumerate(call)}
    out = Split([[] for _ in call])
    for item in items:
        agg = item.get("aggregate_id") if isinstance(item, dict) else None
        if not isinstance(agg, str):
            out.unattributed.append(item)
            continue
        i = index.get(agg)
        if i is None:
            out.foreign.add(agg)
            continue
        seq = item.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool) and seq <= call[i].after:
            continue  # asked for from a cursor above it (the ingest drops it anyway)
        out.items[i].append(item)
    return out


def halves(call: Sequence[T]) -> tuple[list[T], list[T]]:
    """A call whose answer was over the body bound is asked again as two (one session: cannot split)."""
    mid = (len(call) + 1) // 2
    return list(call[:mid]), list(call[mid:])
