"""PostgreSQL's own text form of a `jsonb` value (`payload::text`), produced in Python (pure).

The hash chain (bridge.store.hash_chain) links `payload::text`. Sending the payload already in that form lets
the writer hash exactly the bytes PostgreSQL will print, before the INSERT, instead of asking PostgreSQL
for them afterwards. jsonb prints objects with keys ordered shorter first, then by their UTF-8 bytes, one
value per key (the last one), `", "` and `": "` as separators, strings escaped like Python's `json` with
`ensure_ascii=False` (`\\"`, `\\\\`, `\\b\\f\\n\\r\\t`, `\\u00XX` below U+0020) and numbers as `numeric` prints
them. Python prints a float like `numeric` only without an exponent and when it is not -0.0: for anything
else `jsonb_text` answers None and the writer lets PostgreSQL compute the chain (bridge.store.writes.transaction). The
writer also has PostgreSQL confirm, row by row, that the text it sent is the text it stores.
"""

from __future__ import annotations

import json
import json.encoder
import math
from collections.abc import Callable
from typing import Any

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
# The C encoder `_ENCODER.encode` builds on every call, built once (no circular-reference markers: a
# cycle already fails in `_ordered`).
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_encode: Callable[[Any], str] = _ENCODER.encode
if _c_make_encoder is not None:
    _chunks = _c_make_encoder(None, _ENCODER.default, json.encoder.encode_basestring, None, ": ", ", ",
                              False, False, False)

    def _encode(value: Any) -> str:
        return "".join(_chunks(value, 0))


class _NotCanonical(Exception):
    pass


def jsonb_text(value: Any) -> str | None:
    """`value::jsonb::text` as PostgreSQL would print it, or None where Python cannot be sure to."""
    try:
        return _encode(_ordered(value))
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
        out = {}
        for k in order:
            v = value[k]
            out[k] = _ordered(v) if type(v) in _VISIT else v
        return out
    if t is list:
        return [_ordered(v) if type(v) in _VISIT else v for v in value]
    if t is float and not _prints_like_numeric(value):
        raise _NotCanonical
    if t is not float and isinstance(value, float | dict | list):  # subclasses: be safe, let PostgreSQL link
        raise _NotCanonical
    return value


# Events of one type carry the same keys in the same order: their jsonb order is looked up, not sorted.
# Bounded: small key sets only, at most _ORDERS_MAX of them (then all forgotten at once).
_ORDERS: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_ORDERS_MAX = 1024
_CACHED_KEYS_MAX = 32
_CACHED_CHARS_MAX = 512


def _jsonb_order(keys: tuple[Any, ...]) -> tuple[Any, ...]:
    """Keys in jsonb order: two C sorts, by text, then stably by length (UTF-8 keeps code point order,
    so only the length differs for non-ASCII keys)."""
    ordered = sorted(keys)
    joined = "".join(ordered)
    if joined.isascii():
        ordered.sort(key=len)
    else:
        ordered.sort(key=_utf8_len)
    order = tuple(ordered)
    if len(order) <= _CACHED_KEYS_MAX and len(joined) <= _CACHED_CHARS_MAX:
        if len(_ORDERS) >= _ORDERS_MAX:
            _ORDERS.clear()
        _ORDERS[keys] = order
    return order


_VISIT = frozenset((dict, list, float))


def _utf8_len(key: str) -> int:
    return len(key.encode())


def _prints_like_numeric(f: float) -> bool:
    r = repr(f)
    return math.isfinite(f) and "e" not in r and not (f == 0 and math.copysign(1.0, f) < 0)
