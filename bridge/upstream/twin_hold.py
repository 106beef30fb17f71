"""How long exact sync twins waiting above a hole wait for it to fill before the sync log is asked (pure;
docs/mirror.md "One cursor, two sources", rule 3).

`/global/event` shows every persisted event of a session in seq order: a v2 event as a twin that only
announces its seq (the durable stream stores it), a legacy event as an exact twin that is stored directly
once it is next in line. Under load the durable stream runs behind `/global/event`, so a legacy twin often
arrives while the v2 events before it are still on their way: its hole fills by itself within
milliseconds. Asking the log then only brings what the durable stream brings anyway (and makes its copies
duplicates). So:

- every seq between the cursor and the highest waiting twin is a waiting twin or an **announced** v2 seq:
  the durable stream delivers the rest, wait up to `hold_s` for it, plus the process's backlog (how late
  the streams that deliver come now: under load all of them do, and asking the log for every held hole
  was a storm of repairs; a stream that never delivers is the stall watchdog's, whose reconnect repairs);
- some seq was never shown (a twin lost on `/global/event`, a reconnect's gap): only the log has it, wait
  `debounce_s` (a burst of twins costs one request) and ask.
"""

from __future__ import annotations

from collections.abc import Collection, MutableSet

# A hole wider than this is not looked into seq by seq: it is asked for after the debounce.
MAX_EXPLAINED_SPAN = 4000


def hole_explained(cursor: int, waiting: Collection[int], announced: Collection[int],
                   live_top: int | None = None) -> bool:
    """Every seq above `cursor` and below the highest waiting one is waiting, announced (v2), or not shown
    by `/global/event` yet (above `live_top`, the highest seq it showed: durable events that came first
    wait for the twins of the seqs between them)."""
    if not waiting:
        return True
    top = max(waiting)
    if top - cursor > MAX_EXPLAINED_SPAN:
        return False
    shown = top if live_top is None else live_top
    return all(s in waiting or s in announced or s > shown for s in range(cursor + 1, top))


def hole_wait(cursor: int, waiting: Collection[int], announced: Collection[int], *, debounce_s: float,
              hold_s: float, backlog_s: float = 0.0, live_top: int | None = None) -> float:
    """Seconds the waiting twins may wait, from when the hole was first seen, before the log is asked.
    `backlog_s`: how late the process serves the durable streams now (bridge.upstream.stall_policy): an
    explained hole is waited for that much longer (a stuck stream is the stall watchdog's)."""
    if hole_explained(cursor, waiting, announced, live_top):
        return max(debounce_s, hold_s + backlog_s)
    return debounce_s


def forget_through(seqs: MutableSet[int], cursor: int) -> None:
    """Drop the seqs at or below the cursor (stored)."""
    for s in [s for s in seqs if s <= cursor]:
        seqs.discard(s)
