"""Sessions the sync log's bodies name, with the highest seq known of each (pure; docs/upstream.md §14): a
body names the largest logs first and leaves them out of the answer (bridge.upstream.sync_plan), so what
it is not told about comes back whole. Bounded: the serve's count of sessions grows all day, this memory
does not."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from bridge.ids import valid_session_id

MAX_KNOWN_AGGREGATES = 50_000  # remembered; a body names at most 960 of them (bridge.upstream.sync_plan)


class KnownSizes:
    def __init__(self, limit: int = MAX_KNOWN_AGGREGATES) -> None:
        self._limit = limit
        self._sizes: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._sizes)

    def view(self) -> Mapping[str, int]:
        """Session → highest seq known (read-only)."""
        return self._sizes

    def note_size(self, session_id: str, seq: int) -> None:
        """One session's log reaches at least `seq` (a stored batch): it is named, not answered whole."""
        known = self._sizes
        if seq > known.get(session_id, -2):
            if session_id in known:
                known[session_id] = seq
            else:
                self.note_sizes({session_id: seq})

    def note_sizes(self, sizes: Mapping[str, int]) -> None:
        """Sessions and the highest seq known of each (stored cursors, answers). When full, the smaller half is
        forgotten (a body names only the largest)."""
        known = self._sizes
        for sid, seq in sizes.items():
            if sid in known:
                if seq > known[sid]:
                    known[sid] = seq
            elif valid_session_id(sid):
                if len(known) >= self._limit:
                    keep = heapq.nlargest(self._limit // 2, known.items(), key=lambda kv: kv[1])
                    known.clear()
                    known.update(keep)
                known[sid] = seq
