"""bridge.perf.jsonload: orjson where it agrees with the stdlib, the stdlib's own answer everywhere else."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.errors import BadFrame
from bridge.events import parse_frame
from bridge.events.syncframes import decode_json
from bridge.perf.jsonload import (
    MAX_FAST_DEPTH,
    MAX_FAST_OPENINGS,
    STRICT_DECODER,
    _stdlib_strict,
    fast_loads,
    lenient_loads,
    strict_decode,
    strict_loads,
)


def typed(value: Any) -> Any:
    """A value with its exact types and key order, floats by repr (-0.0 is not 0.0)."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if type(value) is float:
        return ("float", repr(value))
    return (type(value).__name__, value)


def outcome(fn: Any, text: Any) -> Any:
    try:
        return ("ok", typed(fn(text)))
    except (ValueError, RecursionError, TypeError) as exc:
        return ("error", type(exc).__name__, str(exc))


PAIRS = [(strict_loads, _stdlib_strict), (strict_decode, STRICT_DECODER.decode), (lenient_loads, json.loads)]


def assert_same(text: Any) -> None:
    for fast, stdlib in PAIRS:
        assert outcome(fast, text) == outcome(stdlib, text), (fast.__name__, text)


EDGE_NUMBERS = ["0", "-0", "-0.0", "0.0", "1.0", "1E2", "1e2", "1.5e-3", "1e999", "-1e999", "1e-999", "5e-324",
                "1.7976931348623157e308", "1.7976931348623159e308", "0.1", "123456789012345678.5",
                str(2**63 - 1), str(2**63), str(-(2**63)), str(-(2**63) - 1), str(2**64 - 1), str(2**64),
                str(-(2**64)), "9" * 19, "-" + "9" * 19, "1" * 40, "1" * 5000, "NaN", "Infinity", "-Infinity",
                "01", "1.", ".5", "+1", "-", "1e", "1e+", "0x10"]
EDGE_STRINGS = ['"\\ud800"', '"\\udc00x"', '"\\ud83d\\ude00"', '"\\ud83d"', '"\\u0000"', '"a\\/b"', '"\\"\\\\"',
                '"\x7f"', '"\x01"', '"\u2028"', '"é"', '"\ud800"', '"\\x"', '"']
WHITESPACE = ["", " ", "\t", "\n", "\r", "  \n\t", "\x0c", "\u00a0", "\ufeff"]

ws = st.sampled_from(WHITESPACE)
numbers = st.one_of(st.sampled_from(EDGE_NUMBERS), st.integers().map(str),
                    st.floats(allow_nan=False, allow_infinity=False).map(repr),
                    st.from_regex(r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?", fullmatch=True))
strings = st.one_of(st.sampled_from(EDGE_STRINGS), st.text(max_size=12).map(json.dumps),
                    st.text(max_size=12).map(lambda s: json.dumps(s, ensure_ascii=False)))
scalars = st.one_of(numbers, strings, st.sampled_from(["true", "false", "null", "nul", "True"]))


def _container(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    arrays = st.tuples(st.lists(children, max_size=5), ws).map(lambda t: "[" + f",{t[1]}".join(t[0]) + "]")
    keys = st.one_of(strings, st.sampled_from(['"a"', '"b"', '"a"']))  # duplicates: the last one wins
    objects = st.tuples(st.lists(st.tuples(keys, children), max_size=5), ws).map(
        lambda t: "{" + ",".join(f"{k}{t[1]}:{t[1]}{v}" for k, v in t[0]) + "}")
    return st.one_of(arrays, objects)


documents = st.tuples(ws, st.recursive(scalars, _container, max_leaves=30), ws).map("".join)


def _mutate(text: str, data: st.DataObject) -> str:
    how = data.draw(st.sampled_from(["keep", "keep", "truncate", "insert", "trailing"]))
    if how == "truncate" and text:
        return text[: data.draw(st.integers(0, len(text) - 1))]
    if how == "insert":
        i = data.draw(st.integers(0, len(text)))
        return text[:i] + data.draw(st.sampled_from([",", "]", "}", '"', "\\", "1", "\x00", "\ud800"])) + text[i:]
    if how == "trailing":
        return text + data.draw(st.sampled_from([" x", ",", "1", "[]"]))
    return text


@settings(max_examples=1500, deadline=None)
@given(documents, st.data())
def test_fast_decoding_is_the_stdlib_decoding_or_both_refuse(text: str, data: st.DataObject) -> None:
    text = _mutate(text, data)
    assert_same(text)
    try:
        raw = text.encode()
    except UnicodeEncodeError:
        return
    assert_same(raw)


@pytest.mark.parametrize("text", [*EDGE_NUMBERS, *EDGE_STRINGS, '{"a": 1, "b": 2, "a": 3}', "[1]x", "1 2", "",
                                  "[" * 450 + "]" * 450, "[" * 1000 + "]" * 1000, '{"a":' * 995 + "1" + "}" * 995,
                                  "[" + "[[]]," * 500 + "[" * 300 + "]" * 300 + "]",
                                  "[" + "[[]]," * 500 + "[" * 990 + "]" * 990 + "]"])
def test_edge_texts(text: str) -> None:
    assert_same(text)
    assert_same(f'{{"v": {text}}}')


def test_other_input_types_are_the_stdlib_s_business() -> None:
    for text in (b"\xef\xbb\xbf[1]", '[1]'.encode("utf-16"), "[1]".encode("utf-32-le"), b'"\xff"', bytearray(b"[1]"),
                 memoryview(b"[1]"), None, 1):
        assert_same(text)
    with pytest.raises(TypeError):  # the str-only decoder stays str-only
        strict_decode(b"[1]")  # type: ignore[arg-type]


def _refuse(text: Any) -> Any:
    raise AssertionError("the stdlib was asked")


def test_orjson_answers_plain_documents_and_only_those() -> None:
    assert fast_loads('{"seq": 999999999999999999, "x": [1.5, -0.0, "é"]}', _refuse) == {
        "seq": 10**18 - 1, "x": [1.5, -0.0, "é"]}
    for text in (str(2**64), str(-(2**63) - 1), '"\\ud800"', '"\ud800"', "NaN", "1e999",
                 "[" * (MAX_FAST_OPENINGS + 1) + "]" * (MAX_FAST_OPENINGS + 1)):
        with pytest.raises(AssertionError, match="the stdlib was asked"):
            fast_loads(text, _refuse)


def test_bad_frames_are_rejected_as_before() -> None:
    huge = str(2**64)
    with pytest.raises(BadFrame) as exc:
        parse_frame(f'{{"id": "e", "type": "t", "durable": {{"seq": {huge}}}, "data": {{}}}}')
    assert exc.value.reason == "bad_durable"  # an int, not the float orjson would make of it
    for text in ('{"id": NaN}', '{"id": 1e999}', "[" * 5000 + "]" * 5000, '{"id": -Infinity}'):
        with pytest.raises(BadFrame) as exc:
            parse_frame(text)
        assert exc.value.reason == "bad_json"
        with pytest.raises(BadFrame):
            decode_json(text)
    env = parse_frame('{"id": "e\\ud800", "type": "t", "data": {}}')
    assert env.id == "e\ud800"


def _nested(depth: int) -> str:
    return '{"a":' * (depth - 1) + "[]" + "}" * (depth - 1)


def test_a_large_shallow_document_is_decoded_by_orjson() -> None:
    # A sync-log answer: thousands of `[`/`{` in all, a few levels deep (docs/upstream.md §14).
    item = '{"id":"evt_1","aggregate_id":"ses_A","seq":%d,"type":"message.part.updated.1",' \
           '"data":{"part":{"state":{"input":{"cmd":["a","[{"]},"time":{"start":1}}}}}'
    text = "[" + ",".join(item % i for i in range(2000)) + "]"
    assert text.count("{") > 10 * MAX_FAST_OPENINGS
    assert fast_loads(text, _refuse) == json.loads(text)
    assert fast_loads(text.encode(), _refuse) == json.loads(text)
    wide_and_deep = "[" + "[[]]," * MAX_FAST_OPENINGS + _nested(MAX_FAST_DEPTH - 1) + "]"
    assert fast_loads(wide_and_deep, _refuse) == json.loads(wide_and_deep)


@pytest.mark.parametrize("depth", [MAX_FAST_DEPTH + 1, 300, 1000, 5000])
def test_a_large_deep_document_is_the_stdlib_s_business(depth: int) -> None:
    # Deeper than the bound, with more `[`/`{` than the count bound: the stdlib decides (and may refuse).
    text = "[" + "[[]]," * MAX_FAST_OPENINGS + _nested(depth) + "]"
    with pytest.raises(AssertionError, match="the stdlib was asked"):
        fast_loads(text, _refuse)
    assert_same(text)
