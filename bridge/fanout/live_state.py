"""The latest todo list and files-changed summary of each session, kept by the bridge (docs/websocket.md
"Session state", docs/upstream.md §20): live-only upstream (`todo.updated`, `session.diff`, never in the
sync log), so the bridge keeps what the live stream said last, re-reads it from the serve after a
`/global/event` reconnect and when a page subscribes (bridge.fanout.state_resync), and serves it on
`GET /v1/sessions/{id}/todo|diff` (bridge.http.session_state).

Kept in memory, per process: the serve itself keeps the current state (`GET /session/{id}/todo|diff`), so a
bridge that restarts (or a replica that never saw the session) asks it again on the first read; a table
would only hold a copy that can be stale after any gap. Bounded: the least recently touched sessions are
forgotten first (they are asked again when read). Pure: no I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from bridge.fanout.frames import FRAME_FIELD, STATE_KINDS, Items

MAX_SESSIONS = 10_000


def should_push(told: Items | None, read: Items, new_subscriber: bool) -> bool:
    """Whether a re-read list goes to the session's pages: it differs from what they were told (nothing told
    counts as empty: a first empty read is no news), or a new page subscribed and there is something."""
    return read != (told or []) or (new_subscriber and bool(read))


class LiveSessionState:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._max = max_sessions
        self._kept: OrderedDict[str, dict[str, Items]] = OrderedDict()
        self._stale: set[tuple[str, str]] = set()  # kept, but possibly changed while the stream was away

    def get(self, session_id: str, what: str) -> Items | None:
        """The kept list, or None when this process knows nothing sure of it (ask the serve)."""
        if (session_id, what) in self._stale:
            return None
        return self.last_told(session_id, what)

    def last_told(self, session_id: str, what: str) -> Items | None:
        """The list the session's pages were last given (stale or not); None if none."""
        kept = self._kept.get(session_id)
        if kept is None or what not in kept:
            return None
        self._kept.move_to_end(session_id)
        return list(kept[what])

    def put(self, session_id: str, what: str, items: Items) -> bool:
        """Keep `items` as the session's current `what`; True when that changed what was kept."""
        if what not in STATE_KINDS:
            raise ValueError(f"not a session state: {what}")
        kept = self._kept.setdefault(session_id, {})
        self._kept.move_to_end(session_id)
        self._stale.discard((session_id, what))
        changed = kept.get(what) != items
        kept[what] = list(items)
        while len(self._kept) > self._max:
            gone, _ = self._kept.popitem(last=False)
            self._stale -= {(gone, w) for w in STATE_KINDS}
        return changed

    def apply(self, frame: dict[str, Any]) -> bool:
        """Keep what a live `todo` / `diff` frame (bridge.fanout.frames) says; False for other frames."""
        what = frame.get("type")
        if what not in STATE_KINDS:
            return False
        return self.put(str(frame["session"]), str(what), list(frame[FRAME_FIELD[str(what)]]))

    def mark_stale(self) -> set[str]:
        """After a live reconnect: anything may have changed while the stream was away. Every kept list is
        stale (not served) until read again; the sessions to read again."""
        self._stale = {(sid, w) for sid, kept in self._kept.items() for w in kept}
        return set(self._kept)

    def __len__(self) -> int:
        return len(self._kept)
