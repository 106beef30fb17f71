"""The client's sync-log reads on an in-memory transport (bridge.upstream.client): an answer streamed item
by item, one only the stdlib reads exactly asked again and read whole (same items, counted), and
discovery's one call that keeps only the heads."""

from __future__ import annotations

import json
from typing import Any

from bridge import metrics
from bridge.upstream.client import UpstreamClient
from bridge.upstream.sync_plan import SYNC_CUTOFF_MAX
from bridge.upstream.transport import MockTransport, Request, Response, bytes_body
from tests.support.serve_model.rules import items_after, sync_answer

LOG = {f"ses_{c}": [{"id": f"evt_{c}{s}", "aggregate_id": f"ses_{c}", "seq": s, "type": "session.updated.1",
                     "data": {"n": s}} for s in range(5)] for c in "ABC"}


def serve(raw_for: Any) -> tuple[MockTransport, list[dict[str, int]]]:
    bodies: list[dict[str, int]] = []

    async def handler(request: Request) -> Response:
        assert request.path == "/sync/history" and request.body is not None
        asked = json.loads(request.body)
        bodies.append(asked)
        out = sync_answer(LOG, asked, items_after)  # the serve model's sync rule
        raw = raw_for(out)
        return Response(200, {"Content-Type": "application/json"}, bytes_body(*(raw[i:i + 7]
                                                                               for i in range(0, len(raw), 7))))

    return MockTransport(handler), bodies


def counter(c: Any) -> float:
    return float(c._value.get())


async def test_an_answer_is_streamed_and_only_the_asked_items_are_kept() -> None:
    transport, _ = serve(lambda out: json.dumps(out).encode())
    whole = counter(metrics.SYNC_ANSWERS_WHOLE)
    async with UpstreamClient("http://serve.test", transport=transport) as client:
        got = await client.sync_history("ses_A", 2)
    assert [i["seq"] for i in got] == [3, 4] and all(i["aggregate_id"] == "ses_A" for i in got)
    assert counter(metrics.SYNC_ANSWERS_WHOLE) == whole


async def test_what_ijson_reads_otherwise_is_asked_again_and_read_whole_with_the_same_items() -> None:
    def with_nan(out: list[dict[str, Any]]) -> bytes:  # NaN in another session's item: the stdlib reads it
        return json.dumps(out).replace('"n": 0}', '"n": NaN}', 1).encode()

    transport, bodies = serve(with_nan)
    whole = counter(metrics.SYNC_ANSWERS_WHOLE)
    async with UpstreamClient("http://serve.test", transport=transport) as client:
        got = await client.sync_history("ses_A", 2)
    assert [i["seq"] for i in got] == [3, 4]
    assert counter(metrics.SYNC_ANSWERS_WHOLE) == whole + 1 and len(bodies) == 2 and bodies[0] == bodies[1]


async def test_heads_name_the_asked_with_their_cursors_and_keep_nothing() -> None:
    transport, bodies = serve(lambda out: json.dumps(out).encode())
    async with UpstreamClient("http://serve.test", transport=transport) as client:
        client.note_sizes({"ses_C": 4})
        heads = await client.sync_heads({"ses_A": 4, "ses_B": 1})
    assert heads == {"ses_B": 4}  # A has nothing after its cursor
    assert bodies == [{"ses_A": 4, "ses_B": 1, "ses_C": SYNC_CUTOFF_MAX}]
