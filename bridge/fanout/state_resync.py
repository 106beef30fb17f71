"""Re-read of the sessions' todo lists and diff summaries from the serve (`GET /session/{id}/todo|diff` in
the session's directory, docs/upstream.md §20), run with the pending-request re-sync (bridge.fanout.resync):
after every `/global/event` (re)connect over the sessions in scope, and for a session a page subscribes
to. What changed is kept (bridge.fanout.live_state) and pushed as a `todo` / `diff` frame; a subscriber's
session gets its non-empty state pushed even when unchanged, so the new page has it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from collections.abc import Set as AbstractSet
from typing import Any
from urllib.parse import quote

import structlog

from bridge.errors import SessionNotFound
from bridge.fanout.frames import STATE_ITEMS, STATE_KINDS, state_frame
from bridge.fanout.hub import Hub
from bridge.fanout.live_state import LiveSessionState, should_push
from bridge.upstream.client import UpstreamClient

Directories = Callable[[set[str]], Awaitable[dict[str | None, set[str]]]]


async def read_session_state(client: UpstreamClient, session_id: str, directory: str | None,
                             what: str) -> list[dict[str, Any]]:
    """The serve's current todo list or diff summary of a session, in the mapping layer's shape
    (bridge.events.content: never a file's contents). SessionNotFound for a session unknown upstream."""
    _, got = await client.send_json("GET", f"/session/{quote(session_id, safe='')}/{what}", directory=directory)
    return STATE_ITEMS[what](got)


class StateResync:
    def __init__(self, state: LiveSessionState, hub: Hub, client: UpstreamClient, directories: Directories) -> None:
        self.state = state
        self._hub = hub
        self._client = client
        self._directories = directories
        self._log = structlog.get_logger("bridge.relay")

    async def sync(self, sessions: set[str], subscribed: AbstractSet[str] = frozenset()) -> None:
        """Read each session's state; push it when it differs from what its pages were last told, and a
        non-empty one to a new subscriber. A first read of an empty list tells nobody anything."""
        for directory, members in (await self._directories(sessions)).items():
            for sid in sorted(members):
                for what in STATE_KINDS:
                    told = self.state.last_told(sid, what)
                    try:
                        items = await read_session_state(self._client, sid, directory, what)
                    except SessionNotFound:
                        continue
                    except Exception as e:  # judged again at the next pass; the live events still come
                        self._log.warning("state_resync_failed", session_id=sid, what=what,
                                          error=f"{type(e).__name__}: {e}")
                        continue
                    if self.state.last_told(sid, what) != told:
                        continue  # a live event came during the read: it is newer than what was read
                    self.state.put(sid, what, items)
                    if should_push(told, items, sid in subscribed):
                        self._hub.publish_state(sid, state_frame(sid, what, items))
