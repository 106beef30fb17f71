"""Sync-log items, /global/event frames and legacy /event frames → Envelope, over the x* captures."""

from __future__ import annotations

import contextlib
import itertools
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.events import BadFrame, Envelope, parse_envelope, parse_frame
from bridge.events.syncframes import (
    ContiguousRun,
    GlobalFrame,
    contiguous_run,
    parse_bus_event,
    parse_global_frame,
    parse_global_object,
    parse_sync_item,
    parse_sync_log,
    split_type,
)
from bridge.upstream.sse import SSEEvent, SSEParser
from tests.support.legacy_rows import legacy_frame

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
X9 = FIXTURES / "x9-sync-history"
X9_SESSION = "ses_dcf6397f9ffeaHyJXGeS10975k"


def sse_data(path: Path) -> list[str]:
    parser = SSEParser()
    items = parser.feed(path.read_bytes()) + parser.close()
    return [i.data for i in items if isinstance(i, SSEEvent)]


@cache
def global_frames(scenario: str) -> tuple[GlobalFrame, ...]:
    return tuple(parse_global_frame(d) for d in sse_data(FIXTURES / scenario / "global.sse"))


def exchange_body(path: Path) -> Any:
    return json.loads(path.read_text())["response"]["body"]


@cache
def sync_log(name: str) -> tuple[Envelope, ...]:
    out = []
    for e in parse_sync_log(exchange_body(X9 / name)):
        assert isinstance(e, Envelope), e
        out.append(e)
    return tuple(out)


def identity(e: Envelope) -> tuple[str, int | None, str, int | None, str | None]:
    return (e.id, e.seq, e.type, e.version, e.aggregate_id)


# --- types -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("versioned", "expected"),
    [
        ("session.next.step.ended.2", ("session.next.step.ended", 2)),
        ("message.part.updated.1", ("message.part.updated", 1)),
        ("session.created.1", ("session.created", 1)),
        ("session.updated", ("session.updated", None)),
        ("1", ("1", None)),
        (".1", (".1", None)),
        ("a.b.", ("a.b.", None)),
        ("a.x1", ("a.x1", None)),
        ("a.\u0661", ("a.\u0661", None)),  # a non-ASCII digit is not a version
        ("a.12345678901234567890", ("a.12345678901234567890", None)),
    ],
)
def test_split_type_takes_the_numeric_suffix_as_the_schema_version(
    versioned: str, expected: tuple[str, int | None]
) -> None:
    assert split_type(versioned) == expected


# --- the sync log (x9) -------------------------------------------------------------------------------


def test_sync_log_is_one_contiguous_sequence_of_legacy_and_v2_events() -> None:
    log = sync_log("04-sync-history-sid-0.json")
    assert [e.seq for e in log] == list(range(1, 45))
    assert {e.aggregate_id for e in log} == {e.session_id for e in log} == {X9_SESSION}
    names = {e.type for e in log}
    assert {"session.updated", "message.updated", "message.part.updated"} <= names
    assert [e.seq for e in log if e.type.startswith("session.next.")] == list(range(39, 45))


def test_sync_log_after_n_is_the_suffix_and_the_directory_header_does_not_filter_it() -> None:
    full = sync_log("04-sync-history-sid-0.json")
    assert sync_log("05-sync-history-sid-10.json") == tuple(e for e in full if (e.seq or 0) > 10)
    assert sync_log("07-sync-history-sid-0-proj2-header.json") == full


def test_sync_log_with_an_empty_body_starts_every_aggregate_at_seq_0_with_session_created() -> None:
    everything = sync_log("06-sync-history-empty.json")
    ours = [e for e in everything if e.aggregate_id == X9_SESSION]
    assert (ours[0].seq, ours[0].type, ours[0].version) == (0, "session.created", 1)
    assert ours[1:] == list(sync_log("04-sync-history-sid-0.json"))


def test_v2_events_of_the_sync_log_equal_the_history_envelopes_exactly() -> None:
    history = [parse_envelope(i) for i in exchange_body(X9 / "08-v2-history.json")["data"]]
    v2 = [e for e in sync_log("04-sync-history-sid-0.json") if e.type.startswith("session.next.")]
    assert [identity(e) for e in v2] == [identity(h) for h in history]
    # The stored payload is the durable envelope, key order included, whichever source gave it.
    assert [json.dumps(e.raw) for e in v2] == [json.dumps(h.raw) for h in history]
    assert [e.version for e in v2] == [1, 1, 1, 1, 1, 2]


def test_legacy_sync_items_are_kept_exactly_as_received() -> None:
    body = exchange_body(X9 / "04-sync-history-sid-0.json")
    for item, env in zip(body, sync_log("04-sync-history-sid-0.json"), strict=True):
        if not env.type.startswith("session.next."):
            assert env.raw == item
            assert item["type"] == f"{env.type}.{env.version}"
            assert env.data == item["data"]


def test_legacy_event_stream_copies_of_persisted_events_have_the_sync_logs_id_and_data() -> None:
    log = {e.id: e for e in sync_log("04-sync-history-sid-0.json")}
    bus = [legacy_frame(d) for d in sse_data(X9 / "legacy.sse")]
    persisted = [b for b in bus if b.id in log]
    assert len(persisted) == len(log)  # every persisted event was also on /event
    for b in persisted:
        assert b.type == log[b.id].type and b.seq is None
        if not b.type.startswith("session.next."):
            assert b.data == log[b.id].data


# --- /global/event (x7, x11) -------------------------------------------------------------------------


def test_every_global_frame_parses_and_twins_follow_their_bus_copy() -> None:
    for scenario in ("x7-global-event-legacy", "x11-global-event-v2"):
        frames = global_frames(scenario)
        assert len(frames) == len(sse_data(FIXTURES / scenario / "global.sse"))
        assert frames[0].envelope.type == "server.connected" and frames[0].directory is None
        for prev, frame in itertools.pairwise(frames):
            if frame.twin:
                assert not prev.twin and prev.envelope.id == frame.envelope.id
                assert prev.envelope.type == frame.envelope.type
                assert prev.envelope.data == frame.envelope.data  # ISO timestamps on both for v2


def test_twin_seqs_are_contiguous_per_session_from_zero() -> None:
    for scenario in ("x7-global-event-legacy", "x11-global-event-v2"):
        seqs: dict[str | None, list[int | None]] = {}
        for f in global_frames(scenario):
            if f.twin:
                seqs.setdefault(f.envelope.aggregate_id, []).append(f.envelope.seq)
        assert seqs
        for got in seqs.values():
            assert got == list(range(len(got)))


def test_x7_global_stream_spans_two_directories() -> None:
    dirs = {f.directory for f in global_frames("x7-global-event-legacy") if f.twin}
    assert len(dirs) == 2


def test_v2_twins_have_the_durable_identity_but_are_not_exact_payloads() -> None:
    durable = [parse_frame(d) for d in sse_data(FIXTURES / "x11-global-event-v2" / "durable.sse")]
    twins = [f for f in global_frames("x11-global-event-v2") if f.twin and f.envelope.type.startswith("session.")]
    v2 = [f for f in twins if f.envelope.type.startswith("session.next.")]
    assert [identity(f.envelope) for f in v2] == [identity(d) for d in durable]
    assert not any(f.exact for f in v2)
    # Why not exact: the twin has ISO timestamps where the durable stream has epoch ms (§15).
    assert all(isinstance(f.envelope.data["timestamp"], str) for f in v2)
    assert all(isinstance(d.data["timestamp"], int) for d in durable)
    for f, d in zip(v2, durable, strict=True):
        assert {k: v for k, v in f.envelope.data.items() if k != "timestamp"} == {
            k: v for k, v in d.data.items() if k != "timestamp"
        }


def test_legacy_twins_are_exact_and_in_sync_log_form() -> None:
    twins = [f for f in global_frames("x7-global-event-legacy") if f.twin]
    assert twins and all(f.exact for f in twins)
    for f in twins:
        sync = f.raw["payload"]["syncEvent"]
        assert f.envelope.raw == {
            "id": sync["id"],
            "aggregate_id": sync["aggregateID"],
            "seq": sync["seq"],
            "type": sync["type"],
            "data": sync["data"],
        }


def _as_twin(item: dict[str, Any]) -> dict[str, Any]:
    sync = {"id": item["id"], "type": item["type"], "seq": item["seq"], "aggregateID": item["aggregate_id"]}
    return {"directory": "/p", "payload": {"type": "sync", "syncEvent": {**sync, "data": item["data"]},
                                           "id": item["id"]}}


def test_a_sync_item_and_its_twin_give_the_same_envelope() -> None:
    for item in exchange_body(X9 / "06-sync-history-empty.json"):
        assert parse_global_object(_as_twin(item)).envelope == parse_sync_item(item)


def test_a_twin_and_its_sync_item_give_the_same_envelope() -> None:
    for f in global_frames("x7-global-event-legacy"):
        if f.twin:
            s = f.raw["payload"]["syncEvent"]
            item = {"id": s["id"], "aggregate_id": s["aggregateID"], "seq": s["seq"], "type": s["type"],
                    "data": s["data"]}
            assert parse_sync_item(item) == f.envelope


def test_bus_events_carry_session_and_no_seq() -> None:
    kinds = {}
    for f in global_frames("x7-global-event-legacy"):
        if not f.twin:
            assert f.envelope.seq is None and f.envelope.version is None
            kinds[f.envelope.type] = f.envelope.session_id
    assert {"session.status", "session.idle", "message.part.delta", "message.part.updated"} <= set(kinds)
    assert kinds["session.idle"] is not None and kinds["plugin.added"] is None


# --- bad input ---------------------------------------------------------------------------------------

GOOD_ITEM = {"id": "evt_1", "aggregate_id": "ses_A", "seq": 3, "type": "message.updated.1", "data": {}}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"id": None}, "bad_shape"),
        ({"id": ""}, "bad_shape"),
        ({"type": 1}, "bad_shape"),
        ({"seq": "3"}, "bad_sync"),
        ({"seq": True}, "bad_sync"),
        ({"seq": -1}, "bad_sync"),
        ({"seq": 3.0}, "bad_sync"),
        ({"aggregate_id": None}, "bad_sync"),
        ({"aggregate_id": ""}, "bad_sync"),
        ({"data": []}, "bad_shape"),
        ({"data": None}, "bad_shape"),
    ],
)
def test_wrong_sync_item_fields_are_bad_frames(change: dict[str, Any], reason: str) -> None:
    with pytest.raises(BadFrame) as info:
        parse_sync_item({**GOOD_ITEM, **change})
    assert info.value.reason == reason


def test_a_bad_item_does_not_hide_the_rest_of_the_log() -> None:
    got = parse_sync_log([GOOD_ITEM, [], {**GOOD_ITEM, "seq": 4, "id": "evt_2"}])
    assert [type(g).__name__ for g in got] == ["Envelope", "BadFrame", "Envelope"]
    with pytest.raises(BadFrame):
        parse_sync_log({"data": []})


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "{}",
        '{"payload": 1}',
        '{"payload": {"type": "sync"}}',
        '{"payload": {"type": "sync", "syncEvent": {"id": "e", "type": "t.1", "seq": 1}}}',
        '{"payload": {"id": "e", "type": "t", "properties": []}}',
        '{"payload": {"type": "t", "properties": {}}}',
        "not json",
        '{"payload": {"id": "e", "type": "t", "properties": {"x": NaN}}}',
    ],
)
def test_wrong_global_frames_are_bad_frames(text: str) -> None:
    with pytest.raises(BadFrame):
        parse_global_frame(text)


def test_bus_event_needs_id_and_type() -> None:
    with pytest.raises(BadFrame):
        parse_bus_event({"type": "session.idle", "properties": {}})
    assert parse_bus_event({"id": "e", "type": "session.idle"}).data == {}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
_keys = st.sampled_from(["id", "type", "seq", "aggregate_id", "aggregateID", "data", "properties", "payload",
                         "syncEvent", "directory", "project"])
_shaped = st.recursive(
    _json,
    lambda inner: st.dictionaries(_keys, inner, max_size=6),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_shaped)
def test_parsers_raise_nothing_but_bad_frame_on_any_json_value(obj: object) -> None:
    for parse in (parse_sync_item, parse_global_object, parse_bus_event, parse_sync_log):
        with contextlib.suppress(BadFrame):
            parse(obj)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_frame_parsers_raise_nothing_but_bad_frame_on_any_text(text: str) -> None:
    for parse in (parse_global_frame, legacy_frame):
        with contextlib.suppress(BadFrame):
            parse(text)


# --- contiguous runs ---------------------------------------------------------------------------------


def test_the_whole_sync_log_after_the_cursor_is_one_run() -> None:
    log = sync_log("04-sync-history-sid-0.json")
    run = contiguous_run(10, log)
    assert [e.seq for e in run.events] == list(range(11, 45))
    assert (run.skipped, run.missing_from) == (10, None)


def test_a_hole_stops_the_run_and_names_the_first_missing_seq() -> None:
    log = [e for e in sync_log("04-sync-history-sid-0.json") if e.seq != 7]
    run = contiguous_run(2, [*reversed(log), log[5]])
    assert [e.seq for e in run.events] == [3, 4, 5, 6]
    assert (run.skipped, run.missing_from) == (3, 7)  # seqs 1, 2 and one repeat


def test_twins_ahead_of_the_cursor_ask_for_a_repair() -> None:
    twins = [f.envelope for f in global_frames("x7-global-event-legacy") if f.twin]
    (session,) = {e.aggregate_id for e in twins if e.seq == 38}
    ours = [e for e in twins if e.aggregate_id == session]
    assert contiguous_run(-1, ours).missing_from is None
    assert contiguous_run(-1, ours).events == ours
    gap = contiguous_run(20, ours[25:])
    assert (gap.events, gap.missing_from) == ([], 21)
    assert contiguous_run(0, [parse_bus_event({"id": "e", "type": "session.idle"})]) == ContiguousRun([], 0, None)
