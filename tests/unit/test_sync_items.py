"""The sync log's answer as one session's events (bridge.upstream.sync_items): its own aggregate only,
above the cursor, once each, in seq order; what is not an event comes back with its error, in order."""

from __future__ import annotations

from bridge.upstream.sync_items import accepted
from tests.support.fake_upstream import sync_item
from tests.support.memory_upstream import envelope


async def test_only_this_sessions_events_above_the_cursor_once_each_in_seq_order() -> None:
    paced = []

    async def pace() -> None:
        paced.append(1)

    items: list[object] = [sync_item(envelope("ses_A", s)) for s in (4, 2, 3, 2, 1)]
    items += [sync_item(envelope("ses_B", 5, aggregate="ses_B")), "not an item", {"aggregate_id": "ses_A"}]
    envs, bad = await accepted(items, "ses_A", 1, pace)
    assert [e.seq for e in envs] == [2, 3, 4]
    assert [item for item, _ in bad] == ["not an item", {"aggregate_id": "ses_A"}]
    assert all(e.reason for _, e in bad) and paced == [1]
