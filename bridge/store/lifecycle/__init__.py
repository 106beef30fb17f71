"""Sessions leaving the mirror (docs/lifecycle.md, "Erasure" and "Retention"): whole sessions, with every
row of every table that refers to them.

    removal.py  the deletes: one statement per table, row counts per session; the locks they take
    erase.py    erasure on request: the session and its subagents' sessions, a tombstone each (never
                mirrored again), the final `erased` status notice
    retire.py   retention: which sessions are old enough to leave (never a warm, subscribed or pending one)
"""

from bridge.store.lifecycle.erase import Erasure, erase_session, is_tombstoned
from bridge.store.lifecycle.removal import RowCounts, remove_sessions
from bridge.store.lifecycle.retire import RetireCandidate, retire_candidates

__all__ = ["Erasure", "RetireCandidate", "RowCounts", "erase_session", "is_tombstoned", "remove_sessions",
           "retire_candidates"]
