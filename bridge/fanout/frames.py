"""The frame vocabulary of `/v1/ws` (docs/websocket.md), pure: every frame the bridge sends is shaped here
(the durable `event` frames excepted: bridge.fanout.event_frames, and PostgreSQL for a replay,
bridge.store.reads.replay). What the client sends is parsed by bridge.fanout.protocol.

Session frames (`delta`, `permission`, `question`, `status`, `todo`, `diff`, `session_error`, `command`)
carry `session`; answers to an op carry its `id` (`ref`). Questions:

    {"type": "question", "session", "request_id", "state": "asked" | "answered" | "rejected" | "unknown",
     "runtime", "questions": [{question, header, options: [{label, description}], multiple, custom}],
     "call_id", "assistant_message_id", "asked_at", "answers"?, "answered_by"?, "answered_at"?}

A live `answered` / `rejected` question frame carries no `questions` (the `asked` frame had them); one read
back carries everything the pending-requests table knows, `answered_by` included (the token subject of the
bridge command that answered it, null when answered elsewhere).

Live session state (docs/websocket.md "Session state"; docs/upstream.md §20): the todo list
(`todo.updated`), the files-changed summary (`session.diff`) and a session-level error (`session.error`) are
state frames (never dropped, no seq): the latest one is the current state; after a reconnect a page reads
`GET /v1/sessions/{id}/todo|diff`, which answer with the same items (`STATE_ITEMS`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from bridge.errors import as_error_body, error_envelope
from bridge.events import ChatEvent, Kind, PermissionUpdate
from bridge.events.content import diff_items, todo_items
from bridge.events.pending import waiting_detail
from bridge.events.question import QuestionUpdate, stored_question
from bridge.store.commands_pending import StoredRequest
from bridge.store.notices import CommandNotice

MAX_CLIENT_MESSAGE_BYTES = 64 * 1024  # announced in `hello`; a larger client frame closes with 1009
MAX_SUBSCRIPTIONS = 100  # announced in `hello`

Items = list[dict[str, Any]]
STATE_KINDS = ("todo", "diff")
# the frame field of each kind (`todo` carries `todos`, `diff` carries `diff`) and its items' shape, the
# mapping layer's (bridge.events.content: never a file's contents), in frames and in the HTTP answers alike
FRAME_FIELD = {"todo": "todos", "diff": "diff"}
STATE_ITEMS: dict[str, Callable[[object], Items]] = {"todo": todo_items, "diff": diff_items}


def _with_ref(msg: dict[str, Any], ref: object) -> dict[str, Any]:
    if ref is not None:
        msg["id"] = ref
    return msg


def delta_message(session_id: str, ev: ChatEvent, after_seq: int) -> dict[str, Any]:
    msg: dict[str, Any] = {"type": "delta", "session": session_id, "kind": ev.kind, "after_seq": after_seq,
                           "assistant_message_id": ev.assistant_message_id, "delta": ev.text or ""}
    if ev.kind == Kind.DELTA_TOOL_INPUT:
        msg["call_id"] = ev.call_id
    else:
        msg["part_id"] = ev.part_id
    return msg


def permission_message(session_id: str, update: PermissionUpdate) -> dict[str, Any]:
    """A permission request's state (asked or replied)."""
    msg: dict[str, Any] = {
        "type": "permission",
        "session": session_id,
        "state": "replied" if update.replied else "asked",
        "request_id": update.request_id,
        "runtime": update.runtime,
        "data": update.data,
    }
    if update.replied:
        msg["reply"] = update.reply
    else:
        msg.update(action=update.action, assistant_message_id=update.assistant_message_id, call_id=update.call_id,
                   resources=update.resources)
    return msg


def status_message(session_id: str, status: str, reason: str | None) -> dict[str, Any]:
    msg: dict[str, Any] = {"type": "status", "session": session_id, "status": status, "reason": reason}
    if status == "waiting":  # what for and since when, from the reason (bridge.sessions.status_machine)
        msg["waiting"] = waiting_detail(reason)
    return msg


def subscribed_message(session_id: str, after: int | None, head: int, complete: bool, status: str | None,
                       ref: object, title: str | None = None, parent_id: str | None = None) -> dict[str, Any]:
    return _with_ref({"type": "subscribed", "session": session_id, "after": after, "head": head,
                      "complete": complete, "status": status, "title": title, "parent_id": parent_id}, ref)


def caught_up_message(session_id: str, seq: int) -> dict[str, Any]:
    return {"type": "caught_up", "session": session_id, "seq": seq}


def unsubscribed_message(session_id: str, ref: object) -> dict[str, Any]:
    return _with_ref({"type": "unsubscribed", "session": session_id}, ref)


def sessions_message(sessions: list[dict[str, Any]], ref: object, next_cursor: str | None = None) -> dict[str, Any]:
    return _with_ref({"type": "sessions", "sessions": sessions, "next": next_cursor}, ref)


def pong_message(ref: object) -> dict[str, Any]:
    return _with_ref({"type": "pong"}, ref)


def hello_message(upstream: str, sessions: list[str] | None, expires_at: float | None,
                  scope: str = "read", approve: str = "none") -> dict[str, Any]:
    return {"type": "hello", "upstream": upstream, "sessions": sessions, "expires_at": expires_at,
            "max_subscriptions": MAX_SUBSCRIPTIONS, "max_message_bytes": MAX_CLIENT_MESSAGE_BYTES, "scope": scope,
            "approve": approve}


def command_result_message(command: str, status: int, body: dict[str, Any], ref: object) -> dict[str, Any]:
    """The answer to a `command` op: the HTTP route's status, and its body as `result`, or its error
    envelope as `error` (docs/errors.md; a row stored before the envelope is brought into its shape)."""
    msg: dict[str, Any] = {"type": "command_result", "command": command, "status": status}
    if status < 300:
        msg["result"] = body
    else:
        msg["error"] = as_error_body(body)["error"]
    return _with_ref(msg, ref)


def erased_message(session_id: str, ref: object = None) -> dict[str, Any]:
    """The session was erased from the mirror (docs/lifecycle.md, "Erasure"): the subscription's last frame."""
    return _with_ref({"type": "erased", "session": session_id}, ref)


def error_message(code: str, message: str, ref: object = None, session: str | None = None, *,
                  correlation_id: str | None = None, retry_after: float | None = None,
                  **extra: Any) -> dict[str, Any]:
    """An `error` frame: the envelope under `error` (docs/errors.md). `code`, `message` and `retry_after`
    also sit at the top, as before the envelope (deprecated: read `error`)."""
    msg: dict[str, Any] = {"type": "error", "error": error_envelope(code, message, correlation_id, retry_after),
                           "code": code, "message": message}
    if retry_after is not None:
        msg["retry_after"] = retry_after
    if session is not None:
        msg["session"] = session
    msg.update(extra)
    return _with_ref(msg, ref)


# --- session state: todo, diff, session error, command notices -----------------------------------------


def state_frame(session_id: str, what: str, items: Items) -> dict[str, Any]:
    """A session's current todo list or diff summary (`what`: one of STATE_KINDS)."""
    return {"type": what, "session": session_id, FRAME_FIELD[what]: items}


def live_state_message(ev: ChatEvent) -> dict[str, Any] | None:
    """One live event → its state frame, or None (not a state event, no session)."""
    sid = ev.session_id
    if sid is None:
        return None
    if ev.kind == Kind.TODO_UPDATED:
        return state_frame(sid, "todo", STATE_ITEMS["todo"](ev.data.get("todos")))
    if ev.kind == Kind.LEGACY_SESSION_DIFF:
        return state_frame(sid, "diff", STATE_ITEMS["diff"](ev.data.get("diff")))
    if ev.kind == Kind.LEGACY_SESSION_ERROR:
        return {"type": "session_error", "session": sid, "error_type": ev.error_type,
                "error_message": ev.error_message}
    return None


def command_message(notice: CommandNotice) -> dict[str, Any]:
    """A queued prompt's state (`NOTIFY`, bridge.store.notices): `{"type":"command","session",
    "command":"prompt","command_id","state"}`; the row itself is in `GET /v1/sessions/{id}/commands`."""
    return {"type": "command", "session": notice.session_id, "command": "prompt",
            "command_id": notice.command_id, "state": notice.state}


# --- questions -----------------------------------------------------------------------------------------


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
