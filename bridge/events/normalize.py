"""`normalize()`: a v2 envelope → a `ChatEvent`. Pure; never raises on data content.

Rules (docs/upstream.md §4, §9):
- `tool:start` comes from `tool.called` (resolved input), never from `tool.input.started`.
- `step.ended{finish:"tool-calls"}` is a step boundary inside a turn, never the end of a turn.
- Errors follow the open envelope (`bridge.events.error_envelope`).
- Unknown types map to kind `unknown`; never dropped, never fatal.

Every field inside `data` is optional and type-checked on its own, so a wrong-shaped field yields None
and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from bridge.errors import BadFrame
from bridge.events.chat import ChatEvent
from bridge.events.envelope import Envelope, parse_envelope
from bridge.events.error_envelope import error_fields
from bridge.events.fields import as_int as _int
from bridge.events.fields import as_number as _number
from bridge.events.fields import as_obj as _obj
from bridge.events.fields import as_str as _str
from bridge.events.kinds import Kind, kind_of
from bridge.perf.frozen import build, defaults

Fields = dict[str, Any]


def _prompt(data: dict[str, Any]) -> Fields:
    return {"text": _str(_obj(data.get("prompt")).get("text")), "delivery": _str(data.get("delivery"))}


def _model(model: object) -> Fields:
    m = _obj(model)
    return {"model_id": _str(m.get("id")), "provider_id": _str(m.get("providerID"))}


def _step_start(data: dict[str, Any]) -> Fields:
    return {"agent": _str(data.get("agent")), **_model(data.get("model"))}


def _step_end(data: dict[str, Any]) -> Fields:
    tokens = _obj(data.get("tokens"))
    cache = _obj(tokens.get("cache"))
    return {
        "finish": _str(data.get("finish")),
        "cost": _number(data.get("cost")),
        "tokens_input": _int(tokens.get("input")),
        "tokens_output": _int(tokens.get("output")),
        "tokens_reasoning": _int(tokens.get("reasoning")),
        "tokens_cache_read": _int(cache.get("read")),
        "tokens_cache_write": _int(cache.get("write")),
    }


def _error(data: dict[str, Any]) -> Fields:
    return error_fields(data.get("error"))


def _full_text(data: dict[str, Any]) -> Fields:
    return {"text": _str(data.get("text"))}


def _delta(data: dict[str, Any]) -> Fields:
    return {"text": _str(data.get("delta"))}


def _tool_input_start(data: dict[str, Any]) -> Fields:
    return {"tool_name": _str(data.get("name"))}


def _tool_called(data: dict[str, Any]) -> Fields:
    return {"tool_name": _str(data.get("tool"))}


def _agent_switch(data: dict[str, Any]) -> Fields:
    return {"agent": _str(data.get("agent"))}


def _model_switch(data: dict[str, Any]) -> Fields:
    return _model(data.get("model"))


def asked_fields(data: dict[str, Any]) -> Fields:
    """The fields of a permission request (`permission.v2.asked` data, or one pending request)."""
    source = _obj(data.get("source"))
    return {
        "request_id": _str(data.get("id")),
        "action": _str(data.get("action")),
        "assistant_message_id": _str(source.get("messageID")),
        "call_id": _str(source.get("callID")),
    }


def replied_fields(data: dict[str, Any]) -> Fields:
    return {"request_id": _str(data.get("requestID")), "reply": _str(data.get("reply"))}


def question_asked_fields(data: dict[str, Any]) -> Fields:
    """The fields of a question (`question.asked` / `question.v2.asked` data, or one pending question)."""
    tool = _obj(data.get("tool"))
    return {"request_id": _str(data.get("id")), "assistant_message_id": _str(tool.get("messageID")),
            "call_id": _str(tool.get("callID"))}


def question_settled_fields(data: dict[str, Any]) -> Fields:
    return {"request_id": _str(data.get("requestID"))}


def _session_created(data: dict[str, Any]) -> Fields:
    """seq 0 of a session: its creation time (a legacy `info`, docs/upstream.md §20)."""
    return {"timestamp_ms": _int(_obj(_obj(data.get("info")).get("time")).get("created"))}


def _part_removed(data: dict[str, Any]) -> Fields:
    return {"part_id": _str(data.get("partID"))}


_EXTRACTORS: dict[Kind, Callable[[dict[str, Any]], Fields]] = {
    Kind.PART_REMOVED: _part_removed,
    Kind.SESSION_CREATED: _session_created,
    Kind.PROMPT_SYNTHETIC: _full_text,
    Kind.PROMPT_ADMITTED: _prompt,
    Kind.PROMPT_STARTED: _prompt,
    Kind.STEP_START: _step_start,
    Kind.STEP_END: _step_end,
    Kind.STEP_FAIL: _error,
    Kind.TOOL_FAIL: _error,
    Kind.TEXT_END: _full_text,
    Kind.REASONING_END: _full_text,
    Kind.TOOL_INPUT_END: _full_text,
    Kind.DELTA_TEXT: _delta,
    Kind.DELTA_REASONING: _delta,
    Kind.DELTA_TOOL_INPUT: _delta,
    Kind.TOOL_INPUT_START: _tool_input_start,
    Kind.TOOL_START: _tool_called,
    Kind.AGENT_SWITCH: _agent_switch,
    Kind.MODEL_SWITCH: _model_switch,
    Kind.PERMISSION_ASKED: asked_fields,
    Kind.PERMISSION_REPLIED: replied_fields,
    Kind.QUESTION_ASKED: question_asked_fields,
    Kind.QUESTION_REPLIED: question_settled_fields,
    Kind.QUESTION_REJECTED: question_settled_fields,
}


def _common(data: dict[str, Any], values: Fields) -> None:
    # These keys mean the same thing on every session.next.* type that carries them (docs/upstream.md §9).
    # Set into `values` (ChatEvent's fields, None by default) where present and well typed; inlined
    # `_int`/`_str` checks: once per event.
    get = data.get
    timestamp = get("timestamp")
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        values["timestamp_ms"] = timestamp
    for key, name in _COMMON_STRINGS:
        v = get(key)
        if isinstance(v, str):
            values[name] = v
    part_id = get("textID")
    if not isinstance(part_id, str):
        part_id = get("reasoningID")
    if isinstance(part_id, str):
        values["part_id"] = part_id


_COMMON_STRINGS = (("messageID", "message_id"), ("assistantMessageID", "assistant_message_id"), ("callID", "call_id"))
_CHAT_DEFAULTS = defaults(ChatEvent)


def normalize(env: Envelope) -> ChatEvent:
    """Map an envelope to a ChatEvent. Never raises on data content."""
    kind = kind_of(env.type)
    values = _CHAT_DEFAULTS.copy()
    values["envelope"], values["kind"] = env, kind
    _common(env.data, values)
    extractor = _EXTRACTORS.get(kind)
    if extractor is not None:
        values.update({k: v for k, v in extractor(env.data).items() if v is not None})
    return build(ChatEvent, values)  # ChatEvent(envelope=env, kind=kind, **fields), without its __init__


def normalize_stored(payload: object) -> ChatEvent:
    """A stored envelope (`chat_session_events.payload`, an export line) as a ChatEvent. Stored rows are
    valid envelopes; an odd one (hand-edited, another version) still maps, to an `unknown` event."""
    try:
        return normalize(parse_envelope(payload))
    except BadFrame:
        obj = payload if isinstance(payload, dict) else {}
        data = obj.get("data")
        env = Envelope(id=str(obj.get("id", "")), type=str(obj.get("type", "")), seq=None, version=None,
                       aggregate_id=None, session_id=None, data=data if isinstance(data, dict) else {}, raw=obj)
        return ChatEvent(envelope=env, kind=Kind.UNKNOWN)


# --- views -------------------------------------------------------------------------------------------

_VIEW_FIELDS = tuple(f.name for f in fields(ChatEvent) if f.name not in ("envelope", "kind"))


def to_json(ev: ChatEvent) -> dict[str, Any]:
    """The normalized view (for `opencode-bridge map` and the WebSocket); the raw envelope is not in it."""
    view: dict[str, Any] = {
        "kind": ev.kind,
        "seq": ev.seq,
        "event_id": ev.event_id,
        "type": ev.type,
        "session_id": ev.envelope.session_id,
    }
    for name in _VIEW_FIELDS:
        value = getattr(ev, name)
        if value is not None:
            view[name] = value
    return view
