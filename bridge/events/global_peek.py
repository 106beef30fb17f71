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

`session_of` is the other look: the session of a frame whose every effect in this process is tied to that
session being followed or watched here (docs/operations.md "Workers": a worker drops the frames of the
sessions a peer holds before decoding them). It names only these kinds, in the serve's key order:
- bus events: the deltas (v2 `session.next.*.delta`, legacy `message.part.delta`: the fan-out sends them to
  the session's subscribers), `message.updated`, `message.part.updated`, `message.removed`,
  `message.part.removed`, `session.updated` (they warm the session, nothing else);
- sync twins of `message.*` and `session.created` / `session.updated` (the follower's, once warm);
and reads the session id as the decoder does: `properties.sessionID` / the twin's `data.sessionID` (not the
aggregate), found after top-level keys with plain scalar values only, so it is the object's own key. Anything
else (requests, statuses, todo and diff, deletions, server events, an escape or another order) is None:
decode it. Like `peek`, it trusts the serve to write JSON as JavaScript does (never one key twice).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from bridge.events.kinds import DELTA_KINDS, TYPE_KINDS

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


def _alternatives(types: list[str]) -> str:
    return "(?:" + "|".join(re.escape(t) for t in sorted(types)) + ")"


_MESSAGES = ["message.updated", "message.part.updated", "message.removed", "message.part.removed"]
_BUS_OF_SESSION = _alternatives(
    [t for t, k in TYPE_KINDS.items() if k in DELTA_KINDS] + ["message.part.delta", "session.updated", *_MESSAGES])
_TWIN_OF_SESSION = _alternatives(["session.created", "session.updated", *_MESSAGES])
# Top-level keys before `sessionID` whose values are plain scalars: the `sessionID` found is the object's own.
_SCALARS = (r'(?:"(?!sessionID")[A-Za-z]+":(?:"[^"\\]*"|'
            r'-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null),)*')
_SID = r'"sessionID":"(?P<sid>[A-Za-z0-9_]+)"'
_OF_BUS = re.compile(_HEAD + r'"id":"[A-Za-z0-9_]+","type":"' + _BUS_OF_SESSION + r'","properties":\{'
                     + _SCALARS + _SID)
_OF_TWIN = re.compile(_HEAD + r'"type":"sync","syncEvent":\{"id":"[A-Za-z0-9_]+","type":"' + _TWIN_OF_SESSION
                      + r'\.[0-9]{1,9}","seq":[0-9]{1,15},"aggregateID":"[A-Za-z0-9_]+","data":\{' + _SCALARS + _SID)


def session_of(data: str) -> str | None:
    """The session of a frame of the kinds above, or None: decode it."""
    m = (_OF_TWIN if '"syncEvent"' in data[:400] else _OF_BUS).match(data)
    return None if m is None else m.group("sid")
