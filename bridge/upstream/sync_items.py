"""The sync log's answer (`POST /sync/history`, docs/upstream.md §14) as one session's events: parsed, its
own aggregate only, above the cursor, once each, in seq order (pure but for the pacing of a long answer)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bridge.errors import BadFrame
from bridge.events import Envelope
from bridge.events.syncframes import parse_sync_item


async def accepted(items: list[object], session_id: str, cursor: int,
                   pace: Callable[[], Awaitable[None]]) -> tuple[list[Envelope], list[tuple[object, BadFrame]]]:
    """The log's events of `session_id` above `cursor`, once each, in seq order; and the items that are not
    events (each with its error), to be kept as rejects in their order."""
    by_seq: dict[int, Envelope] = {}
    bad: list[tuple[object, BadFrame]] = []
    for i, item in enumerate(items):
        if i % 200 == 0:  # a whole log is parsed here: bounded per loop turn
            await pace()
        try:
            env = parse_sync_item(item)
        except BadFrame as e:
            bad.append((item, e))
            continue
        if env.aggregate_id != session_id:
            continue  # the log of an aggregate the request could not leave out (§14): not ours
        if env.seq is not None and env.seq > cursor:
            by_seq.setdefault(env.seq, env)
    return [by_seq[s] for s in sorted(by_seq)], bad
