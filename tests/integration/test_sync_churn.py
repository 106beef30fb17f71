"""Sessions that come and go cost no sync-log read (docs/mirror.md "A repair only for a real hole"), against
the fake serve (whose `/sync/history` answers like the real one: named sessions after their cutoff, the
others whole) and a real PostgreSQL, with the supervisor and the `/global/event` reader wired as the daemon
wires them:

- a new session, warmed by its first twin (seq 0), and a released session that comes back at cursor + 1
  start without reading the sync log: the twins they showed while being claimed cover their cursor;
- a real hole (twins lost while `/global/event` was away) is repaired by one call that names every
  session it needs, and whose answer holds what it repairs and nothing of the sessions the bridge
  released;
- a session whose first twin is above cursor + 1 (its earlier events were never shown) still reads.
Every test ends with stored == the serve's sync log.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bridge import metrics
from bridge.upstream.sync_plan import SYNC_CUTOFF_MAX

# The fixtures `start` and `statuses` of the sync-mirror tests: the same bridge, wired as the daemon wires it.
from tests.integration.test_sync_mirror import legacy_turn, mirrored, start, statuses  # noqa: F401
from tests.support.fake_upstream import FakeUpstream
from tests.support.waiting import wait_until

UPSTREAM = "fake:1"


async def _new_session(fake: FakeUpstream, sid: str) -> None:
    """A session as the serve makes one: seq 0 `session.created` on /global/event, then a legacy turn."""
    s = fake.add_session(sid)
    s.next_seq = 0
    await fake.append_legacy(sid, "session.created", {"info": {"id": sid, "title": "New session"}})
    await legacy_turn(fake, sid, 1)


def _skipped() -> float:
    return metrics.CATCHUPS_SKIPPED._value.get()


async def _all_mirrored(store: Any, fake: FakeUpstream, sids: list[str]) -> None:
    await asyncio.gather(*(mirrored(store, fake, sid) for sid in sids))


async def _release_settled(b: Any, seen: list[tuple[str, str, Any]], sids: list[str]) -> None:
    """Release sessions once their turn is over: a session released while last known running is adopted
    again by the sweep (docs/lifecycle.md, adoption), which is not what these tests are about."""
    def last(sid: str) -> str | None:
        return next((status for s, status, _ in reversed(seen) if s == sid), None)

    await wait_until(lambda: all(last(sid) not in (None, "running") for sid in sids), 15, 0.02,
                     message="turns over")
    for sid in sids:
        await b.sup.release(sid)
    await wait_until(lambda: not any(sid in b.sup.warm_sessions() for sid in sids), 10, 0.01, message="released")


async def test_new_and_returning_sessions_start_without_a_sync_log_read(fake, store, start,  # noqa: F811
                                                                         statuses) -> None:  # noqa: F811
    b = await start()
    calls, skipped = fake.sync_calls, _skipped()
    sids = [f"ses_N{i:02d}" for i in range(20)]
    for sid in sids:
        await _new_session(fake, sid)
    await _all_mirrored(store, fake, sids)
    assert fake.sync_calls == calls, fake.sync_bodies[-1:]
    assert _skipped() == skipped + len(sids)

    back = sids[:8]
    await _release_settled(b, statuses, back)
    for sid in back:  # they come back with their next event: cursor + 1
        await legacy_turn(fake, sid, 2)
    await _all_mirrored(store, fake, sids)
    assert fake.sync_calls == calls
    assert _skipped() == skipped + len(sids) + len(back)


async def test_a_real_hole_is_one_call_naming_every_session_it_needs_and_none_released_comes_back_whole(
        fake, store, start, statuses) -> None:  # noqa: F811
    b = await start()
    sids = [f"ses_H{i:02d}" for i in range(12)]
    for sid in sids:
        await _new_session(fake, sid)
    await _all_mirrored(store, fake, sids)
    released, warm = sids[:6], sids[6:]
    await _release_settled(b, statuses, released)
    calls, answered, bodies = fake.sync_calls, fake.sync_items_answered, len(fake.sync_bodies)
    connections = b.live.connections
    fake.global_paused = True  # the reader is away: what the warm sessions write meanwhile is lost
    fake.drop_global()
    for sid in warm:
        await legacy_turn(fake, sid, 2)
    fake.global_paused = False
    await wait_until(lambda: b.live.connections > connections, 10, 0.01, message="reconnected")
    await _all_mirrored(store, fake, sids)
    needed = 9 * len(warm)  # one legacy turn each
    new_bodies = fake.sync_bodies[bodies:]
    asked = {sid for body in new_bodies for sid, cut in body.items() if cut != SYNC_CUTOFF_MAX}
    assert set(warm) <= asked  # every session that needs it is named with its cursor
    for sid in released:  # ... and the released ones are named too, left out: never answered whole
        assert all(body.get(sid) == SYNC_CUTOFF_MAX for body in new_bodies)
    assert fake.sync_items_answered - answered == needed, new_bodies
    assert fake.sync_calls - calls <= 2  # the reconnect's repairs, and discovery's probe of the released


async def test_a_session_whose_first_twin_is_above_its_cursor_reads_the_log(fake, store, start) -> None:  # noqa: F811
    sid = "ses_GAP"
    await start()  # discovery's listing ran before the session existed
    s = fake.add_session(sid)
    s.next_seq = 0
    await fake.append_legacy(sid, "session.created", {"info": {"id": sid}}, live=False)
    await legacy_turn(fake, sid, 1, live=False)  # never shown: only the log has seqs 0-8
    calls = fake.sync_calls
    await legacy_turn(fake, sid, 2)  # first twin: seq 9
    await mirrored(store, fake, sid)
    assert fake.sync_calls > calls


async def test_released_sessions_leave_nothing_behind(fake, store, start, statuses) -> None:  # noqa: F811
    b = await start()
    sids = [f"ses_M{i:02d}" for i in range(30)]
    for sid in sids:
        await _new_session(fake, sid)
    await _all_mirrored(store, fake, sids)
    held = b.sup.footprint()
    assert held["warm"] == held["epochs"] == held["status_machines"] == len(sids)
    await _release_settled(b, statuses, sids)
    assert not b.sup.warm_sessions()
    left = b.sup.footprint()
    per_session = ("warm", "epochs", "early_twins", "status_machines", "last_seq", "watched", "titles",
                   "pending_requests", "refused", "parked", "subscribed", "deleted")
    assert {k: left[k] for k in per_session} == dict.fromkeys(per_session, 0)
    assert left["known_to_sync"] >= len(sids)  # the serve's sessions: named in later bodies (bounded)
