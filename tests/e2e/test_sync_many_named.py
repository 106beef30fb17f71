"""`POST /sync/history` on the real `opencode serve` 1.18.33 with many named sessions (docs/upstream.md §14):
the serve answers at most 996 named aggregates in one body (997: HTTP 500, SQLite's expression depth), quickly
and exactly whatever most of those ids are; the bridge's batched client (bridge.upstream.sync_batch), knowing
3,000 sessions, names at most `MAX_NAMED` and still gets exact answers in one call."""

from __future__ import annotations

import asyncio
import time

import pytest

from bridge.upstream.client import FROM_START, UpstreamClient
from bridge.upstream.sync_plan import MAX_NAMED, SYNC_CUTOFF_MAX
from tests.support.metric_values import Since
from tests.support.opencode import OpencodeHTTPError, OpencodeServe

pytestmark = pytest.mark.e2e

SERVE_LIMIT = 996


def _ids(items: list[dict[str, object]], sid: str) -> list[tuple[object, object]]:
    return [(i["seq"], i["id"]) for i in items if i.get("aggregate_id") == sid]


async def test_thousands_of_named_sessions_mostly_unknown_are_answered_exactly(opencode: OpencodeServe) -> None:
    a, b, c = [await opencode.create_session() for _ in range(3)]
    await opencode.request("PATCH", f"/session/{a}", json_body={"title": "renamed"})  # a legacy event: seq 1
    logs = {sid: _ids(await opencode.sync_log(sid), sid) for sid in (a, b, c)}
    assert len(logs[a]) >= 2 and all(len(v) >= 1 for v in logs.values())
    # 993 ids the serve never saw, with cutoffs of every width; A from its seq 0, B left out, C unnamed.
    body: dict[str, int] = {f"ses_{k:026d}": (k * 7919) % SYNC_CUTOFF_MAX for k in range(SERVE_LIMIT - 2)}
    body[a] = 0
    body[b] = SYNC_CUTOFF_MAX
    assert len(body) == SERVE_LIMIT
    t0 = time.perf_counter()
    answer = await opencode.request("POST", "/sync/history", json_body=body)
    took = time.perf_counter() - t0
    print(f"\n/sync/history with {len(body)} named ids ({len(str(body))} B): {took * 1000:.0f} ms")
    assert _ids(answer, a) == logs[a][1:]  # after seq 0
    assert _ids(answer, b) == []
    assert _ids(answer, c) == logs[c]  # not named: whole, from seq 0
    assert took < 5.0
    with pytest.raises(OpencodeHTTPError) as refused:
        await opencode.request("POST", "/sync/history", json_body={**body, "ses_" + "9" * 26: 1})
    assert refused.value.status == 500  # one more named aggregate than the serve can take
    assert MAX_NAMED < SERVE_LIMIT

    # The bridge's client: three sessions asked at once, every other id known → one call, exact answers.
    async with UpstreamClient(opencode.base_url, opencode.username or "opencode", opencode.password or "") as client:
        client.learn_aggregates(f"ses_{k:026d}" for k in range(3000))
        calls = Since("bridge_sync_calls_total")
        got = await asyncio.gather(client.sync_history(a, 0), client.sync_history(b, 1),
                                   client.sync_history(c, FROM_START))
        assert calls.value == 1
    assert _ids(got[0], a) == logs[a][1:]
    assert _ids(got[1], b) == [x for x in logs[b] if isinstance(x[0], int) and x[0] > 1]
    assert _ids(got[2], c) == logs[c]
