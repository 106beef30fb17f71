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
    if isinstance(value, dict):
        if len(value) > 1:
            keys = list(value)
            if all(k.isascii() for k in keys):
                keys.sort(key=lambda k: (len(k), k))
            else:
                keys.sort(key=lambda k: (len(k.encode()), k.encode()))
            return {k: _ordered(value[k]) for k in keys}
        return {k: _ordered(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    if type(value) is float and not _prints_like_numeric(value):
        raise _NotCanonical
    return value


def _prints_like_numeric(f: float) -> bool:
    r = repr(f)
    return math.isfinite(f) and "e" not in r and not (f == 0 and math.copysign(1.0, f) < 0)
