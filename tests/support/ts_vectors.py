"""Test vectors for the TypeScript package's `SessionState` (clients/typescript/test/vectors/): for each capture,
the `event` frames the WebSocket sends for its stored events (`bridge.fanout.event_frames.event_message`, the
one path from rows to frames) and the transcript the bridge builds from the same rows
(`bridge.audit.transcript.build_transcript`, what `GET /v1/sessions/{id}/transcript` answers). The reducer
folding the frames must give the transcript. `python -m tests.support.ts_vectors` rewrites them;
tests/unit/test_ts_vectors.py fails when the committed ones differ from what the bridge's code gives now."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bridge.audit.transcript import TranscriptBuilder
from bridge.events import ChatEvent, Envelope, kind_of, normalize, parse_envelope
from bridge.events.legacy import normalize_legacy
from bridge.events.legacy_state import LegacyTurnState
from bridge.events.question import question_update
from bridge.events.syncframes import parse_global_frame, parse_sync_log
from bridge.fanout.event_frames import event_message
from bridge.fanout.frames import stored_question_message
from bridge.store.commands_pending import StoredRequest
from bridge.upstream.sse import SSEEvent, SSEParser
from tests.support.legacy_rows import STORES, legacy_session, x9_sync_log

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "fixtures" / "opencode-1.18.33"
VECTORS = ROOT / "clients" / "typescript" / "test" / "vectors"

Row = dict[str, Any]


def _durable_rows(scenario: str) -> list[Row]:
    out = []
    for line in (CAPTURES / scenario / "durable.sse").read_text().splitlines():
        if line.startswith("data: "):
            env = json.loads(line[6:])
            out.append({"seq": env["durable"]["seq"], "kind": str(kind_of(env["type"])), "payload": env})
    return out


def _event_rows(events: list[ChatEvent]) -> list[Row]:
    return [{"seq": ev.seq, "kind": str(ev.kind), "payload": ev.envelope.raw} for ev in events if ev.seq is not None]


SYNC_LOGS = {"x12-questions": "13-sync-history.json", "x14-subagent-todo-diff": "09-sync-history-parent.json",
             "x15-undo-delete-attach": "12-sync-history.json"}
ASKED_AT = datetime(2026, 12, 1, 21, 10, 22, tzinfo=UTC)


def _sync_log_sessions(name: str) -> dict[str, list[Row]]:
    """Every session of a capture's sync log, each mapped in seq order with its own state."""
    body = json.loads((CAPTURES / name / SYNC_LOGS[name]).read_text())["response"]["body"]
    by_session: dict[str, list[Envelope]] = {}
    for env in parse_sync_log(body):
        if isinstance(env, Envelope):
            by_session.setdefault(str(env.aggregate_id), []).append(env)
    out = {}
    for sid, envs in sorted(by_session.items()):
        state = LegacyTurnState()
        out[sid] = _event_rows([normalize_legacy(e, state) for e in sorted(envs, key=lambda e: e.seq or 0)])
    return out


def _question_frames(name: str) -> dict[str, list[dict[str, Any]]]:
    """The `question` frames a subscriber gets after `caught_up` (read back from the pending-requests table,
    as `GET /v1/sessions/{id}/transcript` reads them too), per session, from the live stream's question
    events of the capture."""
    parser = SSEParser()
    items = parser.feed((CAPTURES / name / "global.sse").read_bytes()) + parser.close()
    rows: dict[tuple[str, str], StoredRequest] = {}
    for item in items:
        if not isinstance(item, SSEEvent) or '"question.' not in item.data:
            continue
        env = parse_global_frame(item.data).envelope
        # stored as `{id, type, data}`, the shape the list routes' records have too (bridge.events.question)
        ev = normalize(parse_envelope({"id": env.id, "type": env.type, "data": env.data}))
        update = question_update(ev)
        if update is None:
            continue
        k = (update.session_id, update.request_id)
        if not update.settled:
            rows[k] = StoredRequest("question", update.session_id, update.request_id, update.runtime, update.record,
                                    ASKED_AT, None, None, None, None)
        elif k in rows:
            rows[k] = StoredRequest(**{**rows[k].__dict__, "reply": update.state, "answer": update.answers,
                                       "answered_by": "alice", "replied_at": ASKED_AT + timedelta(seconds=1)})
    out: dict[str, list[dict[str, Any]]] = {}
    for (sid, _), row in rows.items():
        out.setdefault(sid, []).append(stored_question_message(row))
    return out


def sources() -> dict[str, tuple[str, list[Row]]]:
    """Vector name → (session id, stored rows in seq order)."""
    out: dict[str, tuple[str, list[Row]]] = {}
    for d in sorted(CAPTURES.iterdir()):
        if (d / "durable.sse").exists():
            rows = _durable_rows(d.name)
            if rows:
                sid = rows[0]["payload"]["data"].get("sessionID") or "ses_unknown"
                out[d.name] = (str(sid), rows)
    for name in STORES:
        sid, events = legacy_session(name)
        out[f"{name}.legacy"] = (sid, _event_rows(events))
    sid, events = x9_sync_log()
    out["x9-sync-history.sync"] = (sid, _event_rows(events))
    seen: set[str] = set()
    for name in SYNC_LOGS:  # x15's log holds x14's sessions again: each session once
        for sid, rows in _sync_log_sessions(name).items():
            if sid not in seen:
                seen.add(sid)
                out[f"{name}.{sid}"] = (sid, rows)
                out.update(_reverted_prefixes(name, sid, rows))
    return out


def _reverted_prefixes(name: str, sid: str, rows: list[Row]) -> dict[str, tuple[str, list[Row]]]:
    """The session as it stood right after each undo ("reverted from here" marks; a later prompt clears them)."""
    out = {}
    for i, r in enumerate(rows):
        info = r["payload"].get("data", {}).get("info")
        if r["kind"] == "session:updated" and isinstance(info, dict) and isinstance(info.get("revert"), dict):
            out[f"{name}.{sid}.upto{r['seq']}"] = (sid, rows[: i + 1])
    return out


def vector(session_id: str, rows: list[Row], questions: list[dict[str, Any]]) -> dict[str, Any]:
    rows = sorted(rows, key=lambda r: int(r["seq"]))
    frames = [event_message(session_id, int(r["seq"]), r["payload"], r["kind"]) for r in rows]
    b = TranscriptBuilder()  # as GET /v1/sessions/{id}/transcript: the rows, then the stored questions
    for r in rows:
        b.add(r)
    for q in questions:
        b.add_question(q)
    return {"session": session_id, "frames": frames, "questions": questions, "transcript": b.entries}


def text_of(v: dict[str, Any]) -> str:
    return json.dumps(v, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def expected() -> dict[str, str]:
    questions = _question_frames("x12-questions")
    return {f"{name}.json": text_of(vector(sid, rows, questions.get(sid, []) if name.startswith("x12") else []))
            for name, (sid, rows) in sources().items()}


def main() -> None:
    VECTORS.mkdir(parents=True, exist_ok=True)
    want = expected()
    for old in VECTORS.glob("*.json"):
        if old.name not in want:
            old.unlink()
    for name, text in want.items():
        (VECTORS / name).write_text(text)
    print(f"{len(want)} vectors in {VECTORS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
