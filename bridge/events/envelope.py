"""The v2 envelope: `parse_frame()` (the `data:` text of one SSE event) and `parse_envelope()` (one
decoded `/history` item) validate it or raise `BadFrame`. Pure.

Only the envelope is validated strictly (it decides where an event is stored); every field inside `data`
is optional and type-checked on its own by the normalizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.errors import BadFrame
from bridge.events.fields import BIGINT_MAX, is_int
from bridge.perf.frozen import build
from bridge.perf.jsonload import strict_decode

SEQ_MAX = BIGINT_MAX  # a seq is stored as a PostgreSQL bigint


@dataclass(frozen=True)
class Envelope:
    id: str
    type: str
    seq: int | None  # durable.seq, None for ephemeral events
    version: int | None  # durable.version
    aggregate_id: str | None  # durable.aggregateID
    session_id: str | None  # data.sessionID (or aggregate id)
    data: dict[str, Any]
    raw: dict[str, Any]  # the whole envelope exactly as parsed


def an_object(value: object, what: str, reason: str = "bad_shape") -> dict[str, Any]:
    """`value` if it is a JSON object, else `BadFrame(reason)` naming `what` and the type it is."""
    if not isinstance(value, dict):
        raise BadFrame(reason, f"{what} is a {type(value).__name__}, not an object")
    return value


def a_nonempty_str(obj: dict[str, Any], key: str, reason: str = "bad_shape") -> str:
    """`obj[key]` if it is a non-empty string, else `BadFrame(reason)`."""
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise BadFrame(reason, f"missing or non-string {key}")
    return value


def parse_frame(data: str) -> Envelope:
    """Parse the `data:` text of one SSE event into a v2 envelope, or raise `BadFrame`."""
    try:
        obj = strict_decode(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError; deep nesting recurses
        raise BadFrame("bad_json", str(exc)[:200]) from None
    return parse_envelope(obj)


def parse_envelope(obj: object) -> Envelope:
    """Validate an already-decoded envelope (e.g. one item of a `/history` page)."""
    obj = an_object(obj, "envelope")
    event_id, event_type = a_nonempty_str(obj, "id"), a_nonempty_str(obj, "type")
    if "data" not in obj and "properties" in obj:
        # The legacy /event envelope (docs/upstream.md §2): ISO timestamps, no durable block. Never consumed.
        raise BadFrame("legacy_envelope", event_type)
    data = an_object(obj.get("data", {}), "data")
    seq, version, aggregate_id = _parse_durable(obj)
    session_id = data.get("sessionID")
    if not isinstance(session_id, str):
        session_id = aggregate_id
    return build(Envelope, {"id": event_id, "type": event_type, "seq": seq, "version": version,
                            "aggregate_id": aggregate_id, "session_id": session_id, "data": data, "raw": obj})


def _parse_durable(obj: dict[str, Any]) -> tuple[int | None, int | None, str | None]:
    if "durable" not in obj:
        return None, None, None
    durable = an_object(obj["durable"], "durable", "bad_durable")
    seq = durable.get("seq")
    if not is_int(seq) or seq < 0:
        raise BadFrame("bad_durable", f"seq must be an integer >= 0, got {seq!r:.40}")
    if seq > SEQ_MAX:
        raise BadFrame("bad_durable", f"seq beyond the bigint range: {str(seq)[:40]}")
    version = durable.get("version")
    if version is not None and not is_int(version):
        raise BadFrame("bad_durable", f"version must be an integer, got {version!r:.40}")
    aggregate_id = durable.get("aggregateID")
    if aggregate_id is not None and not isinstance(aggregate_id, str):
        raise BadFrame("bad_durable", f"aggregateID must be a string, got {aggregate_id!r:.40}")
    return seq, version, aggregate_id
