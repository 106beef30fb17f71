"""Pure: what PostgreSQL cannot store is replaced and flagged, never silently dropped (no database)."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bridge.store.payload import REPLACEMENT, exact_json_text, same_json, storable_json, storable_text

_text = st.text(alphabet=st.characters(codec=None), max_size=12) | st.sampled_from(["\x00", "a\ud800b", "é"])
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=20,
)


def _unstorable(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value or any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_unstorable(v) for v in value)
    if isinstance(value, dict):
        return any(_unstorable(k) or _unstorable(v) for k, v in value.items())
    return False


def test_a_clean_payload_is_returned_as_is() -> None:
    raw = {"id": "evt_1", "data": {"text": "héllo", "n": [1, 2.5, None, True]}}

    result = storable_json(raw)

    assert result.value is raw and not result.lossy


def test_nul_in_values_and_keys_is_replaced_and_the_input_untouched() -> None:
    raw = {"data": {"text": "a\x00b", "k\x00": ["\x00"]}}

    result = storable_json(raw)

    assert result.lossy
    assert result.value == {"data": {"text": f"a{REPLACEMENT}b", f"k{REPLACEMENT}": [REPLACEMENT]}}
    assert raw == {"data": {"text": "a\x00b", "k\x00": ["\x00"]}}


def test_exact_json_text_escapes_nul_and_round_trips() -> None:
    raw = {"text": "a\x00b", "é": 1}

    dumped = exact_json_text(raw)

    assert "\x00" not in dumped and "\\u0000" in dumped and "é" in dumped
    assert json.loads(dumped) == raw


def test_storable_text_replaces_nul_and_lone_surrogates() -> None:
    assert not storable_text("plain").lossy
    assert storable_text("a\x00\ud800").value == f"a{REPLACEMENT}{REPLACEMENT}"
    assert storable_text("a\x00").lossy


@given(_json)
def test_storable_json_leaves_nothing_unstorable_and_flags_exactly_the_lossy_cases(value: Any) -> None:
    result = storable_json(value)

    assert not _unstorable(result.value)
    assert result.lossy == _unstorable(value)
    if not result.lossy:
        assert result.value is value
    assert exact_json_text(result.value).encode("utf-8")


def test_same_json_compares_numbers_by_value_like_jsonb() -> None:
    assert same_json({"a": 1e300, "b": [1, 2.0]}, {"b": [1.0, 2], "a": 10**300})
    assert not same_json({"a": 1}, {"a": 2})
    assert not same_json({"a": True}, {"a": 1})
    assert not same_json({"a": None}, {"a": "null"})
    assert not same_json([1, 2], [1, 2, 3])
    assert not same_json({"a": 1}, {"a": 1, "b": 2})
