"""`question` frames of `/v1/ws` (docs/websocket.md, "Questions"), pure: a question of the `question` tool
(docs/upstream.md §18) as it is asked and as it ends, live or read back from the pending-requests table.

    {"type": "question", "session", "request_id", "state": "asked" | "answered" | "rejected" | "unknown",
     "runtime", "questions": [{question, header, options: [{label, description}], multiple, custom}],
     "call_id", "assistant_message_id", "asked_at", "answers"?, "answered_by"?, "answered_at"?}

A live `answered` / `rejected` frame carries no `questions` (the `asked` frame had them); one read back
carries everything the table knows, `answered_by` included (the token subject of the bridge command that
answered it, null when answered elsewhere).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bridge.events.question import QuestionUpdate, stored_question
from bridge.store.commands_pending import StoredRequest


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat().replace("+00:00", "Z")


def _questions(questions: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The questions with `multiple` and `custom` spelled out (upstream's defaults: false, true)."""
    if questions is None:
        return None
    return [{**q, "multiple": q.get("multiple") is True, "custom": q.get("custom") is not False} for q in questions]


def live_question_message(update: QuestionUpdate, at: datetime) -> dict[str, Any]:
    msg: dict[str, Any] = {"type": "question", "session": update.session_id, "request_id": update.request_id,
                           "state": update.state, "runtime": update.runtime}
    if update.settled:
        msg["answered_at"] = _iso(at)
        if update.answers is not None:
            msg["answers"] = update.answers
    else:
        msg.update(questions=_questions(update.questions), call_id=update.call_id,
                   assistant_message_id=update.assistant_message_id, asked_at=_iso(at))
    return msg


def stored_question_message(row: StoredRequest) -> dict[str, Any]:
    asked = None if row.asked is None else stored_question(row.session_id, row.asked)
    msg: dict[str, Any] = {
        "type": "question", "session": row.session_id, "request_id": row.request_id,
        "state": "asked" if row.reply is None else row.reply, "runtime": row.runtime,
        "questions": None if asked is None else _questions(asked.questions),
        "call_id": None if asked is None else asked.call_id,
        "assistant_message_id": None if asked is None else asked.assistant_message_id,
        "asked_at": _iso(row.asked_at),
    }
    if row.reply is not None:
        msg.update(answered_at=_iso(row.replied_at), answered_by=row.answered_by)
        if row.answer is not None:
            msg["answers"] = row.answer
    return msg
