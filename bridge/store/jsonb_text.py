"""PostgreSQL's own text form of a `jsonb` value (`payload::text`), produced in Python (pure).

The hash chain (bridge.audit.chain) links `payload::text`. Sending the payload already in that form lets
the writer hash exactly the bytes PostgreSQL will print, before the INSERT, instead of asking PostgreSQL
for them afterwards. jsonb prints objects with keys ordered shorter first, then by their UTF-8 bytes, one
value per key (the last one), `", "` and `": "` as separators, strings escaped like Python's `json` with
`ensure_ascii=False` (`\\"`, `\\\\`, `\\b\\f\\n\\r\\t`, `\\u00XX` below U+0020) and numbers as `numeric` prints
them. Python prints a float like `numeric` only without an exponent and when it is not -0.0: for anything
else `jsonb_text` answers None and the writer lets PostgreSQL compute the chain (bridge.store.write). The
writer also has PostgreSQL confirm, row by row, that the text it sent is the text it stores.
"""

from __future__ import annotations

import json
import math
from typing import Any

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(", ", ": "))


class _NotCanonical(Exception):
    pass


def jsonb_text(value: Any) -> str | None:
    """`value::jsonb::text` as PostgreSQL would print it, or None where Python cannot be sure to."""
    try:
        return _ENCODER.encode(_ordered(value))
    except (_NotCanonical, ValueError, TypeError, AttributeError):
        return None


def _ordered(value: Any) -> Any:
    """`value` with every object's keys in jsonb order (two C sorts: by text, then stably by length; UTF-8
    keeps code point order, so only the length differs for non-ASCII keys); raises _NotCanonical for a
    float Python would print otherwise. Only containers and floats are visited (the hot path)."""
    t = type(value)
    if t is dict:
        keys = sorted(value)
        if "".join(keys).isascii():
            keys.sort(key=len)
        else:
            keys.sort(key=_utf8_len)
        out = {}
        for k in keys:
            v = value[k]
            tv = type(v)
            out[k] = _ordered(v) if tv is dict or tv is list or tv is float else v
        return out
    if t is list:
        return [_ordered(v) if type(v) in _VISIT else v for v in value]
    if t is float and not _prints_like_numeric(value):
        raise _NotCanonical
    if t is not float and isinstance(value, float | dict | list):  # subclasses: be safe, let PostgreSQL link
        raise _NotCanonical
    return value


_VISIT = frozenset((dict, list, float))


def _utf8_len(key: str) -> int:
    return len(key.encode())


def _prints_like_numeric(f: float) -> bool:
    r = repr(f)
    return math.isfinite(f) and "e" not in r and not (f == 0 and math.copysign(1.0, f) < 0)
