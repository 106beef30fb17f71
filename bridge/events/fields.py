"""Typed reads of upstream values, one set for the whole mapping layer (v2, legacy, sync frames, stored
rows): a wrong-shaped value reads as None (or `{}` for an object), never as an error — the caller
decides whether the event is still usable (docs/mirror.md, "Bad input").

Also the bounds every layer shares: a seq, a token count or a `?after=` is a PostgreSQL bigint.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

# PostgreSQL bigint: a larger seq could never be written (nor resumed from).
BIGINT_MAX = 2**63 - 1
BIGINT_MIN = -(2**63)


def is_int(value: object) -> TypeGuard[int]:
    # bool is a subclass of int in Python; JSON true/false must never pass for a number.
    return isinstance(value, int) and not isinstance(value, bool)


def as_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def as_int(value: object) -> int | None:
    return value if is_int(value) else None


def as_number(value: object) -> float | None:
    """A finite float, or an integer a double can hold. JSON integers have no size limit: one beyond a
    double's range (10**400) is no usable number, and no error either."""
    if is_int(value):
        try:
            return float(value)
        except OverflowError:
            return None
    return value if isinstance(value, float) and math.isfinite(value) else None


def as_obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def location_directory(obj: object) -> str | None:
    """`location.directory` of an envelope or of a `GET /api/session` item: a string without NUL (which
    PostgreSQL text cannot hold), else None."""
    loc = obj.get("location") if isinstance(obj, dict) else None
    d = loc.get("directory") if isinstance(loc, dict) else None
    return d if isinstance(d, str) and "\x00" not in d else None
