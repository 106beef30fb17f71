"""JSON decoding on the ingest hot path: orjson first, the stdlib decoder whenever the result could differ.

`strict_loads` is `json.loads` refusing NaN/Infinity and out-of-range floats (PostgreSQL's jsonb holds
neither); `lenient_loads` is plain `json.loads`. Both give exactly the stdlib's result, values and
Python types alike, and the stdlib's own errors: orjson is only asked where it is known to agree, and
anything it refuses is decoded (or refused) by the stdlib. Where they would differ, the stdlib decides:

- integers beyond 64 bits (orjson returns a float): any text with 19 digits in a row;
- nesting the stdlib refuses (RecursionError, at the interpreter's recursion limit, orjson at 1024):
  a text with at most `MAX_FAST_OPENINGS` `[`/`{` in all cannot nest deeper, so orjson's value is taken
  as it is; a larger text (every sync-log answer of more than a few items) keeps orjson's value only if
  orjson's encoder takes it back, which it refuses beyond `MAX_FAST_DEPTH` levels of nesting (a C
  walk of the value, about half the decode's time; the stdlib decodes such a text ~3x slower than orjson).
  A deeper value is decoded again by the stdlib, which accepts or refuses it as before;
- NaN/Infinity, `1e999`, lone surrogates (escaped or not), a BOM, bytes in UTF-16/32, other input
  types: orjson refuses them all, so the stdlib answers.
Pure; tests/unit/test_jsonload.py checks the equivalence over generated texts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import orjson

# Far below the stdlib's nesting limit (~990 less the caller's stack depth).
MAX_FAST_OPENINGS = 400
# orjson.dumps refuses a value nested deeper than this ("Recursion limit reached"; orjson 3.x documents
# the limit), far below the stdlib's limit too: what it takes back is as shallow as it must be.
MAX_FAST_DEPTH = 254
# Every digit → "0" and "{" → "[": one C pass, then a substring test and a count.
_PROBE = bytes.maketrans(b"123456789{", b"000000000[")
_LONG_RUN = b"0" * 19  # -2**63 - 1 has 19 digits; every integer orjson turns into a float has >= 19


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON (RFC 8259); PostgreSQL jsonb refuses them and they cannot be re-encoded.
    raise ValueError(f"non-standard JSON constant {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # "1e999" would silently become inf
        raise ValueError(f"number out of range: {text[:40]}")
    return value


# Built once: json.loads with hooks would build a new decoder on every call.
STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def _stdlib_strict(text: Any) -> Any:
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)


def fast_loads(text: Any, fallback: Callable[[Any], Any]) -> Any:
    """`fallback(text)`'s result, through orjson where orjson is sure to give the same; `fallback` must
    be a stdlib decoding that refuses at least what orjson refuses (NaN, Infinity, non-finite floats)
    or accepts them its own way."""
    t = type(text)
    if t is str:
        try:
            raw = text.encode()
        except UnicodeEncodeError:  # a lone surrogate: orjson refuses it, the stdlib accepts it
            return fallback(text)
    elif t is bytes:
        raw = text
    else:
        return fallback(text)
    probe = raw.translate(_PROBE)
    if _LONG_RUN in probe:
        return fallback(text)
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return fallback(text)
    if probe.count(b"[") <= MAX_FAST_OPENINGS or _shallow(value):
        return value
    return fallback(text)


def _shallow(value: Any) -> bool:
    """Nested at most `MAX_FAST_DEPTH` levels (orjson's encoder walks it in C and refuses deeper)."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True


def strict_loads(text: str | bytes) -> Any:
    """`json.loads(text)` refusing NaN/Infinity and non-finite floats (ValueError, RecursionError)."""
    return fast_loads(text, _stdlib_strict)


def strict_decode(text: str) -> Any:
    """`STRICT_DECODER.decode(text)`: a str only (bytes are a TypeError), the stdlib's errors for it."""
    if type(text) is not str:
        return STRICT_DECODER.decode(text)
    return fast_loads(text, STRICT_DECODER.decode)


def lenient_loads(text: str | bytes) -> Any:
    """`json.loads(text)`, NaN, Infinity and `1e999` (inf) included."""
    return fast_loads(text, json.loads)
