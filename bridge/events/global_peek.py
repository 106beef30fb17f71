"""A look at a `/global/event` frame before decoding it (pure; docs/mirror.md "Each event parsed once").

Every persisted v2 event reaches the bridge three times: on its session's durable stream (the copy that is
stored), as a bus event of `/global/event` and as its sync twin there (docs/upstream.md §15). The bus copy of
a non-delta `session.next.*` event is needed by nothing (the fan-out takes deltas, requests and states; the
twin warms the session), and of its twin only the session, seq, type and directory (the stall watchdog,
warming). So those two frames are recognised by their first bytes, in the serve's own key order
(`{"directory":…,"payload":{"id":…,"type":…,"properties":` and
`{"directory":…,"payload":{"type":"sync","syncEvent":{"id":…,"type":…,"seq":…,"aggregateID":…`), and never
decoded whole. A frame that does not match exactly (another order, an escape in an id, a delta, any
other type) is decoded as before: the look can only skip work, never change an outcome.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_STR = r'"[^"\\]*(?:\\.[^"\\]*)*"'  # a JSON string, unrolled (no backtracking)
_HEAD = r'\{(?:"directory":(' + _STR + r'),)?(?:"project":' + _STR + r',)?"payload":\{'
_V2 = r'session\.next\.[a-z][a-z0-9_.]*'
_BUS = re.compile(_HEAD + r'"id":"[A-Za-z0-9_]+","type":"(' + _V2 + r')","properties":')
_TWIN = re.compile(_HEAD + r'"type":"sync","syncEvent":\{"id":"[A-Za-z0-9_]+","type":"(' + _V2 + r')\.[0-9]+",'
                   r'"seq":([0-9]{1,15}),"aggregateID":"([A-Za-z0-9_]+)","data":')


@dataclass(frozen=True)
class DurableTwin:
    """The sync twin of a v2 event (the durable stream delivers the event itself)."""

    session_id: str
    seq: int
    type: str  # without the version suffix, e.g. `session.next.text.ended`
    directory: str | None


SKIP = "skip"  # the bus copy of a persisted v2 event: nothing to do


def _directory(raw: str | None) -> str | None:
    if raw is None:
        return None
    value = json.loads(raw) if "\\" in raw else raw[1:-1]
    return value if isinstance(value, str) and "\x00" not in value else None


def peek(data: str) -> DurableTwin | str | None:
    """`SKIP`, a `DurableTwin`, or None: decode the frame as usual."""
    if '"syncEvent"' in data[:400]:
        m = _TWIN.match(data)
        if m is not None and not m.group(2).endswith(".delta"):
            return DurableTwin(m.group(4), int(m.group(3)), m.group(2), _directory(m.group(1)))
        return None
    m = _BUS.match(data)
    if m is not None:
        return None if m.group(2).endswith(".delta") else SKIP
    return None
