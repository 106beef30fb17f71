"""The session look at a `/global/event` frame (bridge.events.global_peek.session_of): for every frame it names
either the session a full decode names, of a kind whose every effect needs that session followed or watched
here, or nothing (decode it). Against every frame of the real serve's captures, the fakes' frames, and frames
built by hypothesis in other key orders, with escapes, other types, bad seqs and cut text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.errors import BadFrame
from bridge.events.global_peek import session_of
from bridge.events.syncframes import parse_global_frame
from tests.support.serve_model.frames import global_frames

FIXTURES = Path("fixtures/opencode-1.18.33")
CAPTURES = sorted(FIXTURES.glob("*/global.sse"))

DELTAS = {"session.next.text.delta", "session.next.reasoning.delta", "session.next.tool.input.delta",
          "session.next.compaction.delta", "message.part.delta"}
MESSAGES = {"message.updated", "message.part.updated", "message.removed", "message.part.removed"}
BUS_OF_SESSION = DELTAS | MESSAGES | {"session.updated"}
TWIN_OF_SESSION = MESSAGES | {"session.created", "session.updated"}
OTHERS = ["session.deleted", "session.status", "session.idle", "session.error", "session.diff", "todo.updated",
          "permission.asked", "permission.replied", "permission.v2.asked", "question.asked", "question.v2.asked",
          "session.next.text.ended", "session.next.foo.delta", "server.heartbeat", "message.part.deltas",
          "session.compacted"]


def decoded(data: str) -> tuple[str, str | None, bool] | None:
    """(type, session id, twin) as the reader's decoder sees the frame; None when it rejects it."""
    try:
        frame = parse_global_frame(data)
    except BadFrame:
        return None
    return frame.envelope.type, frame.envelope.session_id, frame.twin


def check(data: str) -> str | None:
    """The look's one rule: a session only for a frame of the listed kinds, and then the decoder's session."""
    looked = session_of(data)
    if looked is not None:
        got = decoded(data)
        assert got is not None, data[:300]
        type_, sid, twin = got
        assert type_ in (TWIN_OF_SESSION if twin else BUS_OF_SESSION), data[:300]
        assert sid == looked, data[:300]
    return looked


def _data_lines(path: Path) -> list[str]:
    return [line[6:] for line in path.read_text().splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.parent.name)
def test_every_captured_frame_of_the_listed_kinds_is_named_and_no_other(path: Path) -> None:
    for data in _data_lines(path):
        looked = check(data)
        got = decoded(data)
        assert got is not None
        type_, sid, twin = got
        if type_ in (TWIN_OF_SESSION if twin else BUS_OF_SESSION):
            assert looked == sid, data[:300]  # the serve's own shapes are all recognised
        else:
            assert looked is None, data[:300]


def test_the_captures_hold_every_kind_the_look_names_in_bulk() -> None:
    named = {(got[0], got[2]) for p in CAPTURES for d in _data_lines(p)
             if session_of(d) and (got := decoded(d)) is not None}
    assert {("message.part.delta", False), ("session.next.tool.input.delta", False), ("message.part.updated", True),
            ("message.part.updated", False), ("message.updated", True), ("session.updated", False)} <= named


def test_the_fakes_frames_are_named_too() -> None:
    """tests' and bench.wire's serve write `timestamp` before `sessionID`: a scalar key first is fine."""
    env = {"id": "evt_1", "type": "message.part.updated", "data": {"sessionID": "ses_A", "part": {"id": "p"}},
           "durable": {"aggregateID": "ses_A", "seq": 3, "version": 1}}
    delta = {"id": "evt_2", "type": "session.next.text.delta",
             "data": {"timestamp": 1796112175493, "sessionID": "ses_B", "textID": "t", "delta": "x"}}
    frames = [*global_frames(env, "/p"), *global_frames(delta, None)]
    assert [check(json.dumps(f, separators=(",", ":"))) for f in frames] == ["ses_A", "ses_A", "ses_B"]


@pytest.mark.parametrize("data", [
    # the object's own sessionID is after a nested value: the look cannot tell it from a nested one
    '{"payload":{"id":"evt_1","type":"message.updated","properties":{"info":{"sessionID":"ses_X"},'
    '"sessionID":"ses_A"}}}',
    # an escape in the key, in the id, in a scalar before it; a non-string session
    '{"payload":{"id":"evt_1","type":"message.updated","properties":{"session\\u0049D":"ses_A"}}}',
    '{"payload":{"id":"evt_1","type":"message.updated","properties":{"sessionID":"ses_\\u0041"}}}',
    '{"payload":{"id":"evt_1","type":"message.updated","properties":{"t":"a\\"b","sessionID":"ses_A"}}}',
    '{"payload":{"id":"evt_1","type":"message.updated","properties":{"sessionID":7}}}',
    # the twin's session is data.sessionID, not the aggregate: without it, decode
    '{"payload":{"type":"sync","syncEvent":{"id":"evt_1","type":"message.updated.1","seq":3,"aggregateID":"ses_A",'
    '"data":{"info":{}}}}}',
    # a bad seq, a version that is no version, a twin of a kind every worker needs
    '{"payload":{"type":"sync","syncEvent":{"id":"evt_1","type":"message.updated.1","seq":-3,"aggregateID":"ses_A",'
    '"data":{"sessionID":"ses_A"}}}}',
    '{"payload":{"type":"sync","syncEvent":{"id":"evt_1","type":"message.updated.1234567890","seq":3,'
    '"aggregateID":"ses_A","data":{"sessionID":"ses_A"}}}}',
    '{"payload":{"type":"sync","syncEvent":{"id":"evt_1","type":"session.deleted.1","seq":3,"aggregateID":"ses_A",'
    '"data":{"sessionID":"ses_A"}}}}',
    # another key order of the payload
    '{"payload":{"type":"message.updated","id":"evt_1","properties":{"sessionID":"ses_A"}}}',
])
def test_anything_else_is_left_to_the_decoder(data: str) -> None:
    assert check(data) is None


# -- hypothesis: frames the serve could write, and some it would not ------------------------------------------

KEYS = st.sampled_from(["id", "messageID", "timestamp", "textID", "field", "delta", "time", "info", "part", "x"])
SCALARS = st.one_of(st.integers(-10**6, 10**15), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                    st.none(), st.text(max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(["sessionID", "id", "type"]),
                                                                       inner, max_size=3)), max_leaves=6)
SIDS = st.one_of(st.from_regex(r"ses_[A-Za-z0-9_]{1,30}", fullmatch=True),
                 st.from_regex(r"ses_[A-Za-z0-9_]{1,30}", fullmatch=True),
                 st.sampled_from(["ses_é", 'ses_"q', "ses_a\\b", "", "ses_A\x00", 5, None]))
IDS = st.sampled_from(["evt_1", "evt_230a0d3de0012T2kLDajj9W4e2", "evt_1", "evt_\u00e9", ""])
TYPES = st.sampled_from(sorted(BUS_OF_SESSION | TWIN_OF_SESSION) + OTHERS)


@st.composite
def properties(draw: st.DrawFn) -> dict[str, Any]:
    before = draw(st.lists(st.tuples(KEYS, st.one_of(SCALARS, VALUES) if draw(st.booleans()) else SCALARS),
                           max_size=3))
    after = draw(st.lists(st.tuples(KEYS, VALUES), max_size=3))
    props: dict[str, Any] = dict(before)
    if draw(st.integers(0, 4)):  # mostly there
        props["sessionID"] = draw(SIDS)
    for k, v in after:
        props.setdefault(k, v)
    return props


@st.composite
def frames(draw: st.DrawFn) -> str:
    type_ = draw(TYPES)
    head: dict[str, Any] = {}
    if draw(st.booleans()):
        head["directory"] = draw(st.sampled_from(["/srv/agent/proj", "/a\"b", "/é", "global"]))
    if draw(st.booleans()):
        head["project"] = "p1"
    if draw(st.booleans()):
        version = draw(st.one_of(st.integers(0, 3), st.just(1234567890)))
        seq = draw(st.one_of(st.integers(0, 10**6), st.integers(-5, -1), st.floats(0, 10), st.just(10**20)))
        sync = {"id": draw(IDS), "type": f"{type_}.{version}", "seq": seq,
                "aggregateID": draw(SIDS), "data": draw(properties())}
        items = list(sync.items())
        if not draw(st.integers(0, 5)):  # another key order, now and then
            items = draw(st.permutations(items))
        payload: dict[str, Any] = {"type": "sync", "syncEvent": dict(items)}
    else:
        items = [("id", draw(IDS)), ("type", type_),
                 ("properties", draw(properties()))]
        if not draw(st.integers(0, 5)):  # another key order, now and then
            items = draw(st.permutations(items))
        payload = dict(items)
    frame = {**head, "payload": payload}
    return json.dumps(frame, separators=(",", ":"), ensure_ascii=draw(st.booleans()))


@settings(max_examples=600, deadline=None)
@given(frames())
def test_a_built_frame_is_named_as_the_decoder_names_it_or_left_to_it(data: str) -> None:
    check(data)


@settings(max_examples=400, deadline=None)
@given(frames(), st.integers(0, 400), st.sampled_from(["", "}", '"', "\\", ",", "x", " "]))
def test_a_cut_or_damaged_frame_never_gets_another_session(data: str, at: int, insert: str) -> None:
    damaged = data[:at] + insert + data[at + (1 if insert else 0):]
    looked = session_of(damaged)
    got = decoded(damaged)
    if looked is not None and got is not None:
        assert got[1] == looked, damaged[:300]  # a frame the decoder rejects is rejected by a worker that needs it


PLAIN = st.one_of(st.integers(-10**6, 10**15), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                  st.none(), st.from_regex(r"[A-Za-z0-9 .:/_-]{0,12}", fullmatch=True))


@st.composite
def serve_frames(draw: st.DrawFn) -> tuple[str, str, str, bool]:
    """(frame, type, session, twin) as the serve writes them: its key order, plain scalars before `sessionID`."""
    type_, sid = draw(TYPES), draw(st.from_regex(r"ses_[A-Za-z0-9_]{1,30}", fullmatch=True))
    before = dict(draw(st.lists(st.tuples(KEYS, PLAIN), max_size=3)))
    after = {k: v for k, v in draw(st.lists(st.tuples(KEYS, VALUES), max_size=3)) if k not in before}
    props = {**before, "sessionID": sid, **after}
    twin = draw(st.booleans())
    payload: dict[str, Any] = {"id": "evt_1", "type": type_, "properties": props}
    if twin:
        payload = {"type": "sync", "syncEvent": {"id": "evt_1", "type": f"{type_}.{draw(st.integers(0, 9))}",
                                                 "seq": draw(st.integers(0, 10**15 - 1)), "aggregateID": sid,
                                                 "data": props}}
    head = {"directory": draw(st.sampled_from(["/srv/agent/proj", '/a"b', "/é"]))} if draw(st.booleans()) else {}
    return json.dumps({**head, "payload": payload}, separators=(",", ":")), type_, sid, twin


@settings(max_examples=400, deadline=None)
@given(serve_frames())
def test_every_frame_of_the_listed_kinds_in_the_serves_shape_is_named(built: tuple[str, str, str, bool]) -> None:
    data, type_, sid, twin = built
    looked = check(data)
    assert looked == (sid if type_ in (TWIN_OF_SESSION if twin else BUS_OF_SESSION) else None), data[:300]
