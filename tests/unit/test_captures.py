"""The SSE parser and the event mapping over every captured opencode 1.18.33 stream (fixtures/).

Naming of the captures (docs/upstream.md, top; fixtures/opencode-1.18.33/README.md): `durable*.sse` and
the j-errors `probe-*.sse` bodies are the per-session durable stream, `live*.sse` is `/api/event`,
`legacy*.sse` is the legacy `/event` stream.
Each scenario's `scenario.md` has its timeline; the exceptions below cite it.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

from bridge.events import BadFrame, ChatEvent, normalize, parse_envelope, parse_frame
from bridge.mapcli import run_map
from bridge.upstream.sse import SSEEvent, SSEParser

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
# The `x*` captures (sync log, /global/event, legacy-driven turns) are checked in test_legacy_captures.py.
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and not p.name.startswith("x"))


def _streams(pattern: str) -> list[Path]:
    return sorted(p for p in FIXTURES.glob(f"*/{pattern}") if p.parent.name in SCENARIOS)


DURABLE = _streams("durable*.sse") + _streams("probe-*.sse")
LIVE = _streams("live*.sse")
LEGACY = _streams("legacy*.sse")
V2 = DURABLE + LIVE


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


# Live files of one scenario in the order they were open (timelines in scenario.md).
LIVE_ORDER = ("live.sse", "live-2.sse", "live-after-restart.sse", "live-with-auth.sse")

# Durable sessions whose events no live subscriber of the capture ever saw, so there are no deltas
# to rebuild their texts from and nothing to compare their durable stream with.
NO_LIVE_COVERAGE = {
    # The session's only turn ran at +1.5 s; the live subscriber was opened at +4.5 s.
    "idle-watch",
    # Only durable probes were recorded, no /api/event subscriber.
    "j-errors",
}


@cache
def _frames(path: Path) -> tuple[str, ...]:
    parser = SSEParser()
    items = parser.feed(path.read_bytes()) + parser.close()
    return tuple(i.data for i in items if isinstance(i, SSEEvent))


@cache
def events(path: Path) -> tuple[ChatEvent, ...]:
    return tuple(normalize(parse_frame(data)) for data in _frames(path))


def scenario(name: str, file: str) -> tuple[ChatEvent, ...]:
    return events(FIXTURES / name / file)


def live_of(name: str, files: Iterable[str] | None = None) -> list[ChatEvent]:
    wanted = LIVE_ORDER if files is None else tuple(files)
    return [e for f in wanted if (FIXTURES / name / f).exists() for e in scenario(name, f)]


def durable_view(evs: Iterable[ChatEvent]) -> list[tuple[int | None, str, str]]:
    return [(e.seq, e.event_id, e.type) for e in evs]


def full_replay_of(path: Path) -> Path:
    """The replay from seq 1 that a partial (`after=N`) durable stream of the same connection era cuts."""
    if path.name.startswith("durable-after-restart"):
        return path.parent / "durable-after-restart.full.sse"
    if path.name.startswith("probe-"):
        return path.parent / "probe-no-after.sse"
    return path.parent / "durable.sse"


def after_of(path: Path) -> int | None:
    m = re.search(r"after[-=](\d+|empty)", path.name)
    if m is None:
        return None
    return 0 if m.group(1) == "empty" else int(m.group(1))  # `after=` replays from 1, like after=0 (§3.2)


# --- every stream ------------------------------------------------------------------------------------


def test_fixtures_cover_every_scenario() -> None:
    assert len(SCENARIOS) == 23
    assert {p.parent.name for p in V2} == set(SCENARIOS)


@pytest.mark.parametrize("path", V2, ids=_id)
def test_every_v2_frame_parses_and_no_type_is_unknown(path: Path) -> None:
    evs = events(path)  # raises BadFrame on any bad frame
    assert len(evs) == len(_frames(path))
    unknown_next = [e.type for e in evs if e.type.startswith("session.next.") and e.kind == "unknown"]
    assert unknown_next == []
    assert [e.type for e in evs if e.kind == "unknown"] == []


@pytest.mark.parametrize("path", LEGACY, ids=_id)
def test_legacy_stream_frames_are_all_rejected_as_legacy_envelopes(path: Path) -> None:
    reasons = set()
    for data in _frames(path):
        with pytest.raises(BadFrame) as info:
            parse_frame(data)
        reasons.add(info.value.reason)
    assert reasons == {"legacy_envelope"}


@pytest.mark.parametrize("path", DURABLE, ids=_id)
def test_durable_stream_events_all_have_a_seq_and_one_session(path: Path) -> None:
    evs = events(path)
    assert all(e.seq is not None and e.envelope.version is not None for e in evs)
    assert {e.envelope.aggregate_id for e in evs} == {e.envelope.session_id for e in evs}
    assert len({e.envelope.session_id for e in evs}) <= 1
    seqs = [e.seq or 0 for e in evs]
    assert seqs == sorted(set(seqs)), "seq strictly increases within one durable stream"
    assert not any(e.kind.startswith("delta:") for e in evs), "deltas are live-only (§3.5)"
    assert all(e.type.startswith("session.next.") for e in evs)


@pytest.mark.parametrize("path", LIVE, ids=_id)
def test_live_stream_carries_seq_on_durable_events_only(path: Path) -> None:
    for e in events(path):
        if e.kind.startswith("delta:") or e.kind.startswith("permission:") or e.kind == "noise":
            assert e.seq is None, e.type
        elif e.type.startswith("session.next."):
            assert e.seq is not None, e.type


def test_map_cli_prints_one_line_per_event_of_a_capture(tmp_path: Path) -> None:
    path = FIXTURES / "a-text-turn" / "live.sse"
    out = tmp_path / "out.jsonl"
    with out.open("w") as f:
        assert run_map(str(path), f) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["event_id"] for v in lines] == [e.event_id for e in events(path)]
    assert lines[0]["kind"] == "server:connected"
    assert {v["kind"] for v in lines} >= {"noise", "session:created", "delta:text", "text:end"}


def test_map_cli_reports_legacy_frames_as_bad_frames(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with out.open("w") as f:
        assert run_map(str(FIXTURES / "a-text-turn" / "legacy.sse"), f) == 0
    kinds = {(v["kind"], v["reason"]) for v in map(json.loads, out.read_text().splitlines())}
    assert kinds == {("bad_frame", "legacy_envelope")}


def test_map_cli_exits_1_on_an_unreadable_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with out.open("w") as f:
        assert run_map(str(tmp_path / "missing.sse"), f) == 1


# --- durable replays ---------------------------------------------------------------------------------

PARTIAL = [p for p in DURABLE if after_of(p) is not None]


@pytest.mark.parametrize("path", PARTIAL, ids=_id)
def test_after_n_replay_is_exactly_the_full_replay_past_n(path: Path) -> None:
    n = after_of(path)
    assert n is not None
    full = events(full_replay_of(path))
    assert durable_view(events(path)) == durable_view(e for e in full if e.seq is not None and e.seq > n)


def test_durable_stream_before_a_restart_is_a_prefix_of_the_replay_after_it() -> None:
    # §7: history survives a restart and seq continues at 11.
    before = durable_view(scenario("i-serve-restart", "durable.sse"))
    after = durable_view(scenario("i-serve-restart", "durable-after-restart.full.sse"))
    assert after[: len(before)] == before
    assert [s for s, _, _ in after[len(before) :]] == list(range(11, 17))


def test_legacy_turn_burns_seqs_so_the_durable_stream_starts_later() -> None:
    # §3.1: the legacy turn used seqs 1-16 of the aggregate (only 1-4 reached live.sse before it closed).
    assert [e.seq for e in scenario("l-legacy-prompt", "durable.sse")] == list(range(17, 23))
    legacy_writes = [e for e in scenario("l-legacy-prompt", "live.sse") if e.kind.startswith("legacy:")]
    assert legacy_writes and all(e.seq is not None for e in legacy_writes)


# --- durable against live ----------------------------------------------------------------------------


def _replay_pairs() -> list[tuple[str, str, tuple[str, ...] | None]]:
    pairs: list[tuple[str, str, tuple[str, ...] | None]] = []
    for name in SCENARIOS:
        if name in NO_LIVE_COVERAGE or not (FIXTURES / name / "durable.sse").exists():
            continue
        if name == "i-serve-restart":
            # The pre-kill durable connection saw what the pre-kill live connection saw; the full
            # replay after the restart spans both live connections.
            pairs.append((name, "durable.sse", ("live.sse",)))
            pairs.append((name, "durable-after-restart.full.sse", ("live.sse", "live-after-restart.sse")))
        else:
            pairs.append((name, "durable.sse", None))
    return pairs


def _deleted_cut(live: list[ChatEvent], session_id: str) -> list[ChatEvent]:
    """Live events of a session up to its `session.deleted`.

    §5: a deleted running session keeps emitting on /api/event with seq restarting at 0; those
    events never reach the durable stream and are to be ignored (g2-delete-running-session).
    """
    for i, e in enumerate(live):
        if e.kind == "session:deleted" and e.envelope.session_id == session_id:
            return live[: i + 1]
    return live


@pytest.mark.parametrize(("name", "durable_file", "live_files"), _replay_pairs(), ids=lambda v: str(v))
def test_durable_replay_equals_the_live_view_of_the_session(
    name: str, durable_file: str, live_files: tuple[str, ...] | None
) -> None:
    durable = scenario(name, durable_file)
    sessions = {e.envelope.session_id for e in durable}
    live = live_of(name, live_files)
    if not sessions:  # l2: a legacy-only session has an empty durable stream and no v2 events on live
        sessions = {e.envelope.session_id for e in live if e.envelope.session_id}
    (session_id,) = sessions
    assert session_id is not None
    live_durable = [
        e
        for e in _deleted_cut(live, session_id)
        if e.envelope.session_id == session_id and e.type.startswith("session.next.") and e.seq is not None
    ]
    # Same ids, same seqs, same order: the event id is a cross-stream dedupe key (§2).
    assert durable_view(live_durable) == durable_view(durable)


def test_deleted_running_session_keeps_emitting_live_with_seq_restarting_at_zero() -> None:
    live = live_of("g2-delete-running-session")
    (session_id,) = {e.envelope.session_id for e in scenario("g2-delete-running-session", "durable.sse")}
    assert session_id is not None
    after_delete = live[len(_deleted_cut(live, session_id)) :]
    seqs = [e.seq for e in after_delete if e.seq is not None and e.envelope.session_id == session_id]
    assert seqs[:2] == [0, 1]
    assert max(e.seq or 0 for e in scenario("g2-delete-running-session", "durable.sse")) == 4


def test_live_closed_by_a_legacy_prompt_carries_no_v2_turn() -> None:
    # l-legacy-prompt: live.sse hit EOF when the legacy prompt started (§5); the v2 turn that followed
    # was only seen by the fresh subscriber live-2.sse. Nothing of it can be rebuilt from live.sse.
    assert not [e for e in scenario("l-legacy-prompt", "live.sse") if e.type.startswith("session.next.")]
    assert [e.seq for e in scenario("l-legacy-prompt", "live-2.sse") if e.kind == "text:end"] == [21]


def test_long_lived_live_subscriber_saw_each_session_exactly_like_the_scenario_subscriber() -> None:
    # idle-watch/live.sse stayed open while most other scenarios ran (until the l-legacy-prompt EOF):
    # a second, independent view of the same sessions, deltas included.
    watcher: dict[str | None, list[str]] = defaultdict(list)
    for e in scenario("idle-watch", "live.sse"):
        if e.envelope.session_id is not None:
            watcher[e.envelope.session_id].append(e.event_id)
    owners: dict[str | None, str] = {}
    for name in SCENARIOS:
        if name != "idle-watch" and (FIXTURES / name / "live.sse").exists():
            for e in scenario(name, "live.sse"):
                owners.setdefault(e.envelope.session_id, name)
    assert len(watcher) >= 15
    for session_id, ids in watcher.items():
        own = [
            e.event_id
            for e in scenario(owners[session_id], "live.sse")
            if e.envelope.session_id == session_id
        ]
        assert ids == own, owners[session_id]


# --- rebuilding texts from deltas --------------------------------------------------------------------

Key = tuple[str | None, str | None, str | None]

# Parts that got deltas but never an `.ended`, and why (anything else is a bug).
DANGLING_PARTS = {
    # §7: serve was killed mid-text; the turn is neither resumed nor closed after the restart.
    "i-serve-restart": 1,
}


def _key(e: ChatEvent) -> Key:
    # textID / reasoningID are only unique within one assistant message ("text-0").
    return (e.envelope.session_id, e.assistant_message_id, e.part_id)


def _deltas(live: Iterable[ChatEvent]) -> dict[Key, str]:
    out: dict[Key, str] = defaultdict(str)
    for e in live:
        if e.kind in ("delta:text", "delta:reasoning"):
            assert e.text is not None
            out[_key(e)] += e.text
    return out


LIVE_SCENARIOS = sorted({p.parent.name for p in LIVE} - {"m-basic-auth"})


@pytest.mark.parametrize("name", LIVE_SCENARIOS)
def test_live_deltas_concatenate_to_every_ended_text(name: str) -> None:
    live = live_of(name)
    deltas = _deltas(live)
    ended = [e for e in live if e.kind in ("text:end", "reasoning:end")]
    for e in ended:
        assert deltas.get(_key(e)) == e.text, (e.seq, e.type)
    dangling = set(deltas) - {_key(e) for e in ended}
    assert len(dangling) == DANGLING_PARTS.get(name, 0)


@pytest.mark.parametrize("path", [p for p in DURABLE if p.parent.name not in NO_LIVE_COVERAGE], ids=_id)
def test_durable_texts_equal_the_live_deltas_of_the_same_part(path: Path) -> None:
    deltas = _deltas(live_of(path.parent.name))
    for e in events(path):
        if e.kind in ("text:end", "reasoning:end"):
            assert deltas.get(_key(e)) == e.text, (e.seq, e.type)


@pytest.mark.parametrize("name", LIVE_SCENARIOS)
def test_tool_input_deltas_concatenate_to_the_ended_argument_text(name: str) -> None:
    live = live_of(name)
    args: dict[Key, str] = defaultdict(str)
    for e in live:
        if e.kind == "delta:tool-input":
            args[(e.envelope.session_id, e.assistant_message_id, e.call_id)] += e.text or ""
    for e in live:
        if e.kind == "tool:input-end":
            assert args.get((e.envelope.session_id, e.assistant_message_id, e.call_id)) == e.text


def test_reasoning_turn_rebuilds_reasoning_and_answer() -> None:
    ended = {e.kind: e.text for e in scenario("b2-reasoning-turn", "durable.sse") if e.kind.endswith(":end")}
    assert ended["reasoning:end"] and ended["text:end"]


# --- tool turns and failures -------------------------------------------------------------------------


@pytest.mark.parametrize("path", V2, ids=_id)
def test_tool_start_comes_only_from_tool_called(path: Path) -> None:
    for e in events(path):
        assert (e.kind == "tool:start") == (e.type == "session.next.tool.called")
        if e.kind in ("tool:start", "tool:input-start"):
            assert e.tool_name and e.call_id


def test_tool_turn_steps_end_with_tool_calls_then_stop() -> None:
    evs = scenario("b-tool-turn", "durable.sse")
    ends = [(e.kind, e.finish) for e in evs if e.type == "session.next.step.ended"]
    assert ends.count(("step:end", "tool-calls")) >= 2
    assert ("step:end", "stop") in ends
    starts = [e for e in evs if e.kind == "tool:start"]
    assert {e.tool_name for e in starts} >= {"bash", "read"}
    inputs = {e.call_id for e in evs if e.kind == "tool:input-start"}
    assert {e.call_id for e in starts} <= inputs


def test_interrupted_tool_turn_ends_on_a_tool_calls_step_end() -> None:
    # §4.2 / §11.5: the last durable event is step.ended{tool-calls}, not a turn end.
    last = scenario("d2-interrupt-tool", "durable.sse")[-1]
    assert (last.kind, last.finish) == ("step:end", "tool-calls")
    assert any(e.kind == "tool:fail" for e in scenario("d2-interrupt-tool", "durable.sse"))


@pytest.mark.parametrize("path", V2, ids=_id)
def test_failures_keep_the_upstream_error_type_and_message(path: Path) -> None:
    for e in events(path):
        if e.kind in ("step:fail", "tool:fail"):
            error = e.envelope.data["error"]
            assert (e.error_type, e.error_message) == (error["type"], error["message"])


def test_step_end_carries_tokens_and_cost() -> None:
    last = scenario("a-text-turn", "durable.sse")[-1]
    assert (last.kind, last.finish, last.cost, last.tokens_input, last.tokens_output) == (
        "step:end",
        "stop",
        0.0,
        100,
        10,
    )


# --- /history ----------------------------------------------------------------------------------------

# Every history capture with a 200 answer, with the durable replay it must equal. `prefix` marks
# snapshots taken before the session's last turn, which must be a prefix of the replay instead.
HISTORY = {
    "a-text-turn/12-history.json": ("durable.sse", "equal"),
    "a-text-turn/13-history-after3-limit2.json": ("durable.sse", "equal"),
    "b-tool-turn/06-history.json": ("durable.sse", "equal"),
    "b2-reasoning-turn/05-history.json": ("durable.sse", "equal"),
    "d1-interrupt-text/10-history.json": ("durable.sse", "equal"),
    "d2-interrupt-tool/07-history.json": ("durable.sse", "equal"),
    "e1-steer-queue-during-tool/09-history.json": ("durable.sse", "equal"),
    "e2-steer-during-text/08-history.json": ("durable.sse", "equal"),
    "f1-429-then-success/06-history.json": ("durable.sse", "equal"),
    "f2-429-persistent/06-history.json": ("durable.sse", "equal"),
    "f3-500/06-history.json": ("durable.sse", "equal"),
    "f4-401/06-history.json": ("durable.sse", "equal"),
    "f5-stream-cut/08-history.json": ("durable.sse", "equal"),
    "f6-in-stream-error/06-history.json": ("durable.sse", "equal"),
    "k-permission-ask/10-history.json": ("durable.sse", "equal"),
    # Taken after the restart, before the next prompt (+16.9 s vs +17.0 s).
    "i-serve-restart/07-history-after-restart.json": ("durable-after-restart.full.sse", "prefix"),
    "i-serve-restart/11-history-end.json": ("durable-after-restart.full.sse", "equal"),
    # Taken after the legacy turn and before the v2 turn (+7.1 s vs +7.7 s): legacy writes are not
    # durable v2 events, so the history is still empty although seqs 1-16 are used (§3.1).
    "l-legacy-prompt/05-history.json": ("durable.sse", "prefix"),
    "j-errors/12-history-after=1000000.json": ("probe-no-after.sse", "equal"),
    "j-errors/13-history-limit=2.json": ("probe-no-after.sse", "equal"),
}


def _history_files(status: int) -> list[str]:
    out = []
    for p in sorted(FIXTURES.glob("*/*history*.json")):
        if p.parent.name not in SCENARIOS:
            continue
        if json.loads(p.read_text())["response"]["status"] == status:
            out.append(_id(p))
    return out


def test_every_successful_history_capture_is_checked() -> None:
    assert sorted(HISTORY) == _history_files(200)


@pytest.mark.parametrize("rel", sorted(HISTORY))
def test_history_equals_the_durable_replay(rel: str) -> None:
    exchange = json.loads((FIXTURES / rel).read_text())
    body = exchange["response"]["body"]
    items = [parse_envelope(item) for item in body["data"]]
    query = dict(re.findall(r"[?&](\w+)=([^&]*)", exchange["request"]["path"]))
    after, limit = int(query.get("after", 0)), int(query["limit"]) if "limit" in query else None
    stream_file, mode = HISTORY[rel]
    replay = [e for e in scenario(rel.split("/")[0], stream_file) if e.seq is not None and e.seq > after]
    expected = replay[:limit] if limit is not None else replay
    got = [(e.seq, e.id, e.type) for e in items]
    if mode == "equal":
        assert got == durable_view(expected)
        assert body["hasMore"] == (limit is not None and len(replay) > limit)
    else:
        assert got == durable_view(expected)[: len(got)]
        assert len(got) < len(expected)
    # The history item is the same envelope as the streamed one, not just the same ids.
    streamed = {e.event_id: e.envelope.raw for e in expected}
    assert all(item.raw == streamed[item.id] for item in items)
