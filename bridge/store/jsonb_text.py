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
    """`value` with every object's keys in jsonb order; raises _NotCanonical for a float Python would
    print otherwise. Only containers and floats are visited (the hot path)."""
    t = type(value)
    if t is dict:
        keys = tuple(value)
        order = _ORDERS.get(keys)
        if order is None:
            order = _jsonb_order(keys)
            if len(_ORDERS) >= _ORDERS_MAX:
                _ORDERS.clear()
            _ORDERS[keys] = order
        out = {k: value[k] for k in order}
        for k, v in out.items():
            if type(v) in _VISIT:
                out[k] = _ordered(v)  # a value replaced, no key added: iterating stays valid
        return out
    if t is list:
        return [_ordered(v) if type(v) in _VISIT else v for v in value]
    if t is float and not _prints_like_numeric(value):
        raise _NotCanonical
    if t is not float and isinstance(value, float | dict | list):  # subclasses: be safe, let PostgreSQL link
        raise _NotCanonical
    return value


# Events of one type carry the same keys in the same order: their jsonb order is looked up, not sorted.
_ORDERS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_ORDERS_MAX = 4096


def _jsonb_order(keys: tuple[Any, ...]) -> tuple[Any, ...]:
    """Keys in jsonb order (two C sorts: by text, then stably by length; UTF-8 keeps code point order,
    so only the length differs for non-ASCII keys)."""
    ordered = sorted(keys)
    if "".join(ordered).isascii():
        ordered.sort(key=len)
    else:
        ordered.sort(key=_utf8_len)
    return tuple(ordered)


_VISIT = frozenset((dict, list, float))


def _utf8_len(key: str) -> int:
    return len(key.encode())


def _prints_like_numeric(f: float) -> bool:
    r = repr(f)
    return math.isfinite(f) and "e" not in r and not (f == 0 and math.copysign(1.0, f) < 0)
