"""Making JSON storable in PostgreSQL without losing anything (pure, no I/O).

PostgreSQL `text` and `jsonb` cannot hold some values that valid JSON (and Python's `json`) can carry:
- U+0000 (`"\\u0000"` in JSON) in any string, object keys included;
- lone UTF-16 surrogates (`"\\ud800"`), which are not encodable as UTF-8;
- NaN / Infinity (Python's `json.loads` accepts them; `jsonb` does not).
Bad input must never wedge a session (docs/mirror.md, "Bad input"): such a payload is stored with the
offending characters replaced by U+FFFD (non-finite numbers by null) and flagged lossy, and the exact JSON text is kept
elsewhere (`chat_event_rejects`, reason `lossy_payload`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from bridge.perf.frozen import build
from bridge.store.jsonb_text import jsonb_text

REPLACEMENT = "\ufffd"
_UNSTORABLE_CHARS = re.compile("[\x00\ud800-\udfff]")
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Storable:
    value: Any  # the JSON value, safe for `jsonb` / `text`
    lossy: bool  # True if anything had to be replaced


def storable_text(text: str) -> Storable:
    """`text` with the characters PostgreSQL cannot store replaced by U+FFFD."""
    if text.isascii() and "\x00" not in text:
        return Storable(text, False)
    cleaned = _UNSTORABLE_CHARS.sub(REPLACEMENT, text)
    return Storable(cleaned, cleaned != text)


def all_storable(texts: tuple[str | None, ...]) -> bool:
    """True if none of these strings holds a character PostgreSQL cannot store (one check for all)."""
    joined = "".join(filter(None, texts))  # leaves out None (and "", which adds nothing)
    if joined.isascii():
        return "\x00" not in joined
    return not _UNSTORABLE_CHARS.search(joined)


def storable_json(value: Any) -> Storable:
    """`value` (a parsed JSON document) made storable in `jsonb`; the input is never modified."""
    if _plainly_storable(value):
        return Storable(value, False)
    cleaned, lossy = _clean(value)
    return Storable(cleaned, lossy)


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


@dataclass(frozen=True)
class StorableText:
    text: str  # JSON text of `value`, ready for a `::jsonb` cast
    value: Any  # the (cleaned) JSON value
    lossy: bool
    canonical: bool  # `text` is PostgreSQL's own text form of it (bridge.store.jsonb_text)


def storable_json_text(value: Any) -> StorableText:
    """`storable_json` and the JSON text of its result, in PostgreSQL's jsonb text form where possible. On
    the plain path one encoding: the text that proves the value storable is the very text sent."""
    text = jsonb_text(value)
    canonical = text is not None
    if text is None:
        try:
            text = _ENCODER.encode(value)
        except ValueError:
            text = None
    if text is not None and (text.isascii() or not _SURROGATES.search(text)) and "\\u0000" not in text:
        # StorableText(text, value, False, canonical), without its __init__ (bridge.perf.frozen)
        return build(StorableText, {"text": text, "value": value, "lossy": False, "canonical": canonical})
    cleaned, lossy = _clean(value)
    text = jsonb_text(cleaned)
    if text is not None:
        return StorableText(text, cleaned, lossy, True)
    return StorableText(json.dumps(cleaned, ensure_ascii=False, separators=(",", ":")), cleaned, lossy, False)


def exact_json_text(value: Any) -> str:
    """The JSON text of `value`, exactly (NUL is escaped by `json`; surrogates are escaped if present)."""
    dumped = json.dumps(value, ensure_ascii=False)
    if _SURROGATES.search(dumped):
        return json.dumps(value, ensure_ascii=True)
    return dumped


def _plainly_storable(value: Any) -> bool:
    """Fast path (C json encoder): no NaN/Infinity, no escaped NUL, no lone surrogate. A string that
    merely contains the six characters \\u0000 fails it too; the slow walk then finds nothing."""
    try:
        dumped = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return False
    return "\\u0000" not in dumped and not _SURROGATES.search(dumped)


def _clean(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        s = storable_text(value)
        return s.value, s.lossy
    if isinstance(value, dict):
        return _clean_object(value)
    if isinstance(value, list):
        items = [_clean(v) for v in value]
        if any(changed for _, changed in items):
            return [v for v, _ in items], True
        return value, False
    if isinstance(value, float) and not math.isfinite(value):
        return None, True
    return value, False


def _clean_object(obj: dict[Any, Any]) -> tuple[Any, bool]:
    out: dict[Any, Any] = {}
    lossy = False
    for key, item in obj.items():
        new_key, key_changed = _clean(key)
        new_item, item_changed = _clean(item)
        lossy = lossy or key_changed or item_changed
        out[new_key] = new_item
    return (out, True) if lossy else (obj, False)


def same_json(a: Any, b: Any) -> bool:
    """JSON equality as `jsonb` sees it: numbers compare by value, so 1e300 read back from `jsonb` (as the
    integer 1000…0) still equals the float it was stored from."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if _is_number(a) and _is_number(b):
        if isinstance(a, int) and isinstance(b, int):
            return bool(a == b)
        try:
            return float(a) == float(b)
        except OverflowError:
            return False
    return type(a) is type(b) and bool(a == b)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
