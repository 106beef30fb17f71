"""Questions of the built-in `question` tool (docs/upstream.md §18): their state changes as one value, and
the check of an answer against its question. Pure.

Both runtimes send the same data: `question.asked` (legacy) / `question.v2.asked` `{id, sessionID,
questions: [{question, header, options: [{label, description}], multiple?, custom?}], tool: {messageID,
callID}}`, then `question[.v2].replied {sessionID, requestID, answers}` or `.rejected {sessionID,
requestID}`. None of it is in the sync log, so a change comes from a live event, from the re-sync against
the list routes (a question pending upstream, or one no longer pending there), or from the stored record.
`record` is what the pending-requests table keeps: the envelope as received (`{id, type, data}`), or for a
re-sync the bridge's own record in the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.errors import BadFrame
from bridge.events.chat import ChatEvent
from bridge.events.envelope import parse_envelope
from bridge.events.gen2 import form_questions, normalize_any
from bridge.events.kinds import Kind
from bridge.events.normalize import question_asked_fields

ASKED, ANSWERED, REJECTED, UNKNOWN = "asked", "answered", "rejected", "unknown"
_STATE_OF_KIND = {Kind.QUESTION_ASKED: ASKED, Kind.QUESTION_REPLIED: ANSWERED, Kind.QUESTION_REJECTED: REJECTED}
MAX_FREE_TEXT = 4000  # characters of one typed answer


@dataclass(frozen=True)
class QuestionUpdate:
    session_id: str
    request_id: str
    state: str  # asked | answered | rejected | unknown (settled while the bridge did not listen)
    runtime: str  # v2 | legacy: which routes answer it (docs/upstream.md §18)
    record: dict[str, Any]  # what is stored
    questions: list[dict[str, Any]] | None = None  # asked: as upstream sent them
    assistant_message_id: str | None = None
    call_id: str | None = None
    answers: list[list[str]] | None = None  # answered: one list of chosen labels (or typed texts) per question

    @property
    def settled(self) -> bool:
        return self.state != ASKED


def _runtime(event_type: str) -> str:
    # OpenCode 2.x's forms (docs/upstream.md §24) belong to its one runtime, v2: the re-sync lists them there.
    return "v2" if event_type.startswith(("question.v2.", "form.")) else "legacy"


def _asked_questions(ev: ChatEvent) -> list[dict[str, Any]] | None:
    if ev.type.startswith("form."):
        form = ev.data.get("form")
        return form_questions(form) if isinstance(form, dict) else None
    return _questions(ev.data.get("questions"))


def _questions(value: object) -> list[dict[str, Any]] | None:
    return [q for q in value if isinstance(q, dict)] if isinstance(value, list) else None


def _answers(value: object) -> list[list[str]] | None:
    if not isinstance(value, list) or not all(isinstance(a, list) for a in value):
        return None
    return [[s for s in a if isinstance(s, str)] for a in value]


def question_update(ev: ChatEvent) -> QuestionUpdate | None:
    """The update a live `question[.v2].*` event carries; None for any other event, or one without a
    request id or a session."""
    state = _STATE_OF_KIND.get(ev.kind)
    sid = ev.session_id
    if state is None or not ev.request_id or not sid:
        return None
    return QuestionUpdate(sid, ev.request_id, state, _runtime(ev.type), ev.envelope.raw,
                          questions=_asked_questions(ev) if state == ASKED else None,
                          assistant_message_id=ev.assistant_message_id, call_id=ev.call_id,
                          answers=_answers(ev.data.get("answers")) if state == ANSWERED else None)


def pending_question(runtime: str, item: object, session_id: str | None = None) -> QuestionUpdate | None:
    """One item of a list route (`GET /question`: legacy, every session; `GET /api/session/{id}/question`:
    v2) as an `asked` update; None for an item without an id or a session."""
    if not isinstance(item, dict):
        return None
    sid = item.get("sessionID") if session_id is None else session_id
    f = question_asked_fields(item)
    rid = f["request_id"]
    if not (isinstance(rid, str) and rid and isinstance(sid, str) and sid):
        return None
    data = {**item, "sessionID": sid}
    kind = "question.v2.asked" if runtime == "v2" else "question.asked"
    record = {"id": f"bridge_resync_asked_{rid}", "type": kind, "data": data}
    return QuestionUpdate(sid, rid, ASKED, runtime, record, _questions(item.get("questions")),
                          f["assistant_message_id"], f["call_id"])


def settled_while_away(session_id: str, request_id: str, runtime: str, note: str) -> QuestionUpdate:
    """A question pending here but no longer upstream: answered or rejected while the bridge did not
    listen; which one is not known."""
    data = {"sessionID": session_id, "requestID": request_id, "note": note}
    record = {"id": f"bridge_resync_settled_{request_id}", "type": "bridge.question.settled", "data": data}
    return QuestionUpdate(session_id, request_id, UNKNOWN, runtime, record)


def stored_question(session_id: str, record: object) -> QuestionUpdate | None:
    """A stored `asked` record read back (None for one that is not a question envelope)."""
    try:
        ev = normalize_any(parse_envelope(record))
    except BadFrame:
        return None
    update = question_update(ev)
    return None if update is None else QuestionUpdate(**{**update.__dict__, "session_id": session_id})


# --- answers -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionSpec:
    """What an answer to one question may be."""

    labels: tuple[str, ...]
    multiple: bool  # more than one choice allowed
    custom: bool  # free text allowed (upstream's default: true)


def question_specs(questions: object) -> list[QuestionSpec]:
    specs = []
    for item in questions if isinstance(questions, list) else []:
        q: dict[str, Any] = item if isinstance(item, dict) else {}
        raw = q.get("options")
        options: list[Any] = raw if isinstance(raw, list) else []
        labels = tuple(o["label"] for o in options if isinstance(o, dict) and isinstance(o.get("label"), str))
        specs.append(QuestionSpec(labels, q.get("multiple") is True, q.get("custom") is not False))
    return specs


def check_answers(specs: list[QuestionSpec], answers: object) -> list[list[str]]:
    """The answers to send upstream (one list of strings per question) if `answers` fits the questions,
    else ValueError saying why. One list per question; exactly one entry for a single-choice question, at
    least one (no repeats) for a multiple-choice one. An entry is the label of one of the question's
    options, or `{"text": "..."}`: free text, where the question allows it (docs/commands.md). A string
    that names no option is refused, not sent as free text: a mistyped label must not become an answer."""
    if not isinstance(answers, list) or len(answers) != len(specs):
        raise ValueError(f"answers must be a list of {len(specs)} list(s), one per question")
    out: list[list[str]] = []
    for n, (spec, chosen) in enumerate(zip(specs, answers, strict=True), 1):
        if not isinstance(chosen, list) or not chosen or (not spec.multiple and len(chosen) != 1):
            raise ValueError(f"answer {n} must be a list of {'at least' if spec.multiple else 'exactly'} "
                             "one choice")
        texts = [_entry(n, spec, c) for c in chosen]
        if len(set(texts)) != len(texts):
            raise ValueError(f"answer {n} names a choice twice")
        out.append(texts)
    return out


def _entry(n: int, spec: QuestionSpec, entry: object) -> str:
    if isinstance(entry, str):
        if entry not in spec.labels:
            raise ValueError(f"answer {n}: {entry[:60]!r} is none of the options {list(spec.labels)}")
        return entry
    text = entry.get("text") if isinstance(entry, dict) and set(entry) == {"text"} else None
    if not isinstance(text, str):
        raise ValueError(f"answer {n}: an entry is an option's label or {{\"text\": ...}}")
    if not spec.custom:
        raise ValueError(f"answer {n}: this question takes one of its options only")
    if not 1 <= len(text.strip()) <= MAX_FREE_TEXT or "\x00" in text:
        raise ValueError(f"answer {n}: a typed answer is 1 to {MAX_FREE_TEXT} characters of text")
    return text
