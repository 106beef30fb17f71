"""Legacy-driven turns normalized into the kinds of a v2 turn (pure, no I/O; docs/legacy.md).

A turn driven through the legacy API (OpenCode's own CLI, TUI and web app) writes no `session.next.*`
events; it writes `message.updated` / `message.part.updated` whose payload is always the *whole*
message or part, re-sent as it grows (docs/upstream.md §16). `normalize_legacy()` turns each of them into
one `ChatEvent` with the kind the matching v2 event has: the first update that shows a milestone (a part
started, a text ended, a tool running, a step finished …) gets the milestone's kind, every other update
the non-terminal `legacy:message-updated` / `legacy:part-updated`. So a text re-sent ten times ends once.

What "already emitted" means lives in `LegacyTurnState`, which is plain data and can be rebuilt from the
normalized columns of the rows already stored (`LegacyTurnState.from_rows`), so a restarted follower
continues exactly where the previous process stopped. Mapping the same event again (a sync-log repair of
a seq the twin already gave) yields the same kind.

Types this module does not handle go to `bridge.events.normalize` unchanged, so one call maps every
event of `/global/event`, the legacy `/event` stream and the sync log. Nothing here raises on data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridge.events.chat import ChatEvent
from bridge.events.envelope import Envelope
from bridge.events.error_envelope import error_fallback
from bridge.events.fields import as_int as _int
from bridge.events.fields import as_number as _number
from bridge.events.fields import as_obj as _obj
from bridge.events.fields import as_str as _str
from bridge.events.kinds import NOISE, PART_KINDS, UNKNOWN, Kind
from bridge.events.legacy_shapes import LegacyChatEvent
from bridge.events.legacy_state import (
    DELTA_REASONING,
    DELTA_TEXT,
    EXTRA_NOISE,
    MESSAGE_UPDATED,
    PART_DELTA,
    PART_UPDATED,
    PERMISSION_ASKED,
    PERMISSION_REPLIED,
    PLAIN_PART_TYPES,
    PROMPT,
    PROMPT_SYNTHETIC,
    REASONING_END,
    REASONING_START,
    SESSION_ERROR,
    SESSION_UPDATED,
    STEP_END,
    STEP_FAIL,
    STEP_START,
    TEXT_END,
    TEXT_START,
    TOOL_FAIL,
    TOOL_INPUT_START,
    TOOL_START,
    TOOL_SUCCESS,
    KindName,
    LegacyTurnState,
)
from bridge.events.normalize import normalize

# --- errors ------------------------------------------------------------------------------------------

Fields = dict[str, Any]


def legacy_error(error: object) -> tuple[str | None, str]:
    """`(error_type, error_message)` of a legacy error `{name, data: {message}}`; the name is kept as the
    type, the message is display text (never interpreted); a v2-shaped `{type, message}` is read too."""
    err = _obj(error)
    error_type = _str(err.get("name"))
    if error_type is None:
        error_type = _str(err.get("type"))
    message = _str(_obj(err.get("data")).get("message"))
    if message is None:
        message = _str(err.get("message"))
    return error_type, message if message is not None else error_fallback(error_type)


def _error_fields(error: object) -> Fields:
    error_type, message = legacy_error(error)
    return {"error_type": error_type, "error_message": message}


# --- messages ----------------------------------------------------------------------------------------


def _message_updated(env: Envelope, state: LegacyTurnState) -> tuple[KindName, Fields]:
    info = _obj(env.data.get("info"))
    msg_id, role, time = _str(info.get("id")), info.get("role"), _obj(info.get("time"))
    completed = _int(time.get("completed"))
    values: Fields = {
        "timestamp_ms": completed if completed is not None else _int(time.get("created")),
        "agent": _str(info.get("agent")),
    }
    if role != "assistant":
        model = _obj(info.get("model"))
        if role == "user" and msg_id is not None:
            state.user_messages.add(msg_id)
        values.update(message_id=msg_id, model_id=_str(model.get("modelID")), provider_id=_str(model.get("providerID")))
        return MESSAGE_UPDATED, values
    values.update(
        assistant_message_id=msg_id,
        message_id=_str(info.get("parentID")),
        model_id=_str(info.get("modelID")),
        provider_id=_str(info.get("providerID")),
    )
    if msg_id is None:
        return MESSAGE_UPDATED, values
    error = info.get("error")
    if isinstance(error, dict) and state.reach(msg_id, STEP_FAIL, env.id):
        return STEP_FAIL, {**values, **_error_fields(error)}
    if state.reach(msg_id, STEP_START, env.id):
        return STEP_START, values
    return MESSAGE_UPDATED, values


# --- parts -------------------------------------------------------------------------------------------

_TOOL_KINDS = {"pending": TOOL_INPUT_START, "running": TOOL_START, "completed": TOOL_SUCCESS, "error": TOOL_FAIL}


def _text_like(env: Envelope, state: LegacyTurnState, part: dict[str, Any], values: Fields) -> KindName:
    part_id: str = values["part_id"]
    if values.get("message_id") is not None:  # a text part of a user message is the prompt
        if state.reach(part_id, PROMPT, env.id):
            values["text"] = _str(part.get("text"))
            return PROMPT
        return PART_UPDATED
    reasoning = part.get("type") == "reasoning"
    state.part_types[part_id] = "reasoning" if reasoning else "text"
    start, end = (REASONING_START, REASONING_END) if reasoning else (TEXT_START, TEXT_END)
    if _int(_obj(part.get("time")).get("end")) is not None and state.reach(part_id, end, env.id):
        values["text"] = _str(part.get("text"))
        return end
    if state.reach(part_id, start, env.id):
        return start
    return PART_UPDATED


def _tool_error(error: object) -> Fields:
    if isinstance(error, str):  # the tool's error is a bare string: no type to keep
        return {"error_type": None, "error_message": error}
    return _error_fields(error)


def _tool(env: Envelope, state: LegacyTurnState, part: dict[str, Any], values: Fields) -> KindName:
    tool_state = _obj(part.get("state"))
    values.update(call_id=_str(part.get("callID")), tool_name=_str(part.get("tool")))
    kind = _TOOL_KINDS.get(str(tool_state.get("status")))
    if kind is None or not state.reach(values["part_id"], kind, env.id):
        return PART_UPDATED
    if kind == TOOL_FAIL:
        values.update(_tool_error(tool_state.get("error")))
    return kind


def _step_finish(env: Envelope, state: LegacyTurnState, part: dict[str, Any], values: Fields) -> KindName:
    if not state.reach(values["part_id"], STEP_END, env.id):
        return PART_UPDATED
    tokens = _obj(part.get("tokens"))
    cache = _obj(tokens.get("cache"))
    values.update(
        finish=_str(part.get("reason")),
        cost=_number(part.get("cost")),
        tokens_input=_int(tokens.get("input")),
        tokens_output=_int(tokens.get("output")),
        tokens_reasoning=_int(tokens.get("reasoning")),
        tokens_cache_read=_int(cache.get("read")),
        tokens_cache_write=_int(cache.get("write")),
    )
    return STEP_END


_PART_MAPPERS: dict[str, Callable[[Envelope, LegacyTurnState, dict[str, Any], Fields], KindName]] = {
    "text": _text_like,
    "reasoning": _text_like,
    "tool": _tool,
    "step-finish": _step_finish,
}


def _part_updated(env: Envelope, state: LegacyTurnState) -> tuple[KindName, Fields]:
    part = _obj(env.data.get("part"))
    part_id, msg_id, part_type = _str(part.get("id")), _str(part.get("messageID")), _str(part.get("type"))
    values: Fields = {"part_id": part_id, "timestamp_ms": _int(env.data.get("time"))}
    values["message_id" if msg_id in state.user_messages else "assistant_message_id"] = msg_id
    content_kind = _content_kind(part, part_type, values)
    if content_kind is not None:  # a file, patch, synthetic text … part: its kind once, then re-sends
        if part_id is not None and state.reach(part_id, content_kind, env.id):
            return content_kind, values
        return PART_UPDATED, values
    if part_type is None or (part_type not in _PART_MAPPERS and part_type not in PLAIN_PART_TYPES):
        return UNKNOWN, values  # kept and counted like any unknown type
    mapper = _PART_MAPPERS.get(part_type)
    if mapper is None or part_id is None:
        return PART_UPDATED, values
    return mapper(env, state, part, values), values


def _content_kind(part: dict[str, Any], part_type: str | None, values: Fields) -> Kind | None:
    """The kind of a content part (docs/upstream.md §20, §22); a synthetic text of a user message is part of
    its prompt (`prompt:synthetic`), never a prompt of its own."""
    if part_type == "text" and part.get("synthetic") is True and values.get("message_id") is not None:
        values["text"] = _str(part.get("text"))
        return PROMPT_SYNTHETIC
    return PART_KINDS.get(part_type) if part_type is not None else None


# --- live-only legacy events -------------------------------------------------------------------------


def _part_delta(env: Envelope, state: LegacyTurnState) -> tuple[KindName, Fields]:
    part_id = _str(env.data.get("partID"))
    part_type = state.part_types.get(part_id) if part_id is not None else None
    kind = DELTA_REASONING if part_type == "reasoning" else DELTA_TEXT if part_type == "text" else PART_DELTA
    values = {"part_id": part_id, "assistant_message_id": _str(env.data.get("messageID")),
              "text": _str(env.data.get("delta"))}
    return kind, values


def _session_updated(env: Envelope, state: LegacyTurnState) -> tuple[KindName, Fields]:
    time = _obj(_obj(env.data.get("info")).get("time"))
    return SESSION_UPDATED, {"timestamp_ms": _int(time.get("updated"))}


def _session_error(env: Envelope, state: LegacyTurnState) -> tuple[KindName, Fields]:
    return SESSION_ERROR, _error_fields(env.data.get("error"))


def _permission_asked(env: Envelope, state: LegacyTurnState) -> tuple[KindName, Fields]:
    tool = _obj(env.data.get("tool"))
    return PERMISSION_ASKED, {
        "request_id": _str(env.data.get("id")),
        "action": _str(env.data.get("permission")),
        "assistant_message_id": _str(tool.get("messageID")),
        "call_id": _str(tool.get("callID")),
    }


def _permission_replied(env: Envelope, state: LegacyTurnState) -> tuple[KindName, Fields]:
    return PERMISSION_REPLIED, {"request_id": _str(env.data.get("requestID")), "reply": _str(env.data.get("reply"))}


_MAPPERS: dict[str, Callable[[Envelope, LegacyTurnState], tuple[KindName, Fields]]] = {
    "message.updated": _message_updated,
    "message.part.updated": _part_updated,
    "message.part.delta": _part_delta,
    "session.updated": _session_updated,
    "session.error": _session_error,
    "permission.asked": _permission_asked,
    "permission.replied": _permission_replied,
}


def normalize_legacy(env: Envelope, state: LegacyTurnState) -> ChatEvent:
    """Map any envelope of a session; legacy types use (and update) `state`. Never raises on data.

    Feed one session's events in seq order (live-only events in arrival order), each once; mapping an
    event again gives the same kind as long as `state` has seen it."""
    mapper = _MAPPERS.get(env.type)
    if mapper is None:
        return ChatEvent(envelope=env, kind=NOISE) if env.type in EXTRA_NOISE else normalize(env)
    kind, values = mapper(env, state)
    return LegacyChatEvent(envelope=env, kind=kind, **{k: v for k, v in values.items() if v is not None})
