"""Pure mapping of upstream v2 envelopes (`session.next.*`) to normalized chat events.

No I/O here. `parse_frame()` turns the `data:` text of one SSE event (or one `/history` item) into an
`Envelope` or raises `BadFrame`; `normalize()` maps an envelope to a `ChatEvent` with the columns the
store and the WebSocket need. The raw envelope always travels along untouched (`Envelope.raw`).

Rules (PROTOCOL.md §4, §9; issue #2):
- `tool:start` comes from `tool.called` (resolved input), never from `tool.input.started`.
- `step.ended{finish:"tool-calls"}` is a step boundary inside a turn, never the end of a turn.
- The error envelope is open: any `type` string is kept; `message` is the display text; a missing or
  non-string message gets a bounded generic fallback; no decision is ever made on `message` text.
- Unknown types map to kind `unknown`; never dropped, never fatal.

Only the envelope is validated strictly (it decides where an event is stored); every field inside
`data` is optional and type-checked on its own, so a wrong-shaped field yields None and nothing else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TypeGuard


class BadFrame(ValueError):
    """A frame that is not a usable v2 envelope; `reason` is a short machine-readable code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Envelope:
    id: str
    type: str
    seq: int | None  # durable.seq, None for ephemeral events
    version: int | None  # durable.version
    aggregate_id: str | None  # durable.aggregateID
    session_id: str | None  # data.sessionID (or aggregate id)
    data: dict[str, Any]
    raw: dict[str, Any]  # the whole envelope exactly as parsed


@dataclass(frozen=True)
class ChatEvent:
    """One normalized event. Optional fields are None when the type does not carry them."""

    envelope: Envelope
    kind: str
    timestamp_ms: int | None = None
    message_id: str | None = None
    assistant_message_id: str | None = None
    part_id: str | None = None  # textID / reasoningID
    call_id: str | None = None
    tool_name: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    finish: str | None = None
    tokens_input: int | None = None
    tokens_output: int | None = None
    tokens_reasoning: int | None = None
    tokens_cache_read: int | None = None
    tokens_cache_write: int | None = None
    cost: float | None = None
    text: str | None = None  # full text (text/reasoning ended), prompt text, or delta text
    delivery: str | None = None
    agent: str | None = None
    model_id: str | None = None
    provider_id: str | None = None
    # Added after the first contract: permission.v2.* (PROTOCOL.md §4.4).
    request_id: str | None = None  # per_… (asked: data.id, replied: data.requestID)
    action: str | None = None  # asked: e.g. "bash"
    reply: str | None = None  # replied: "once" | "always" | "reject"

    @property
    def seq(self) -> int | None:
        return self.envelope.seq

    @property
    def event_id(self) -> str:
        return self.envelope.id

    @property
    def type(self) -> str:
        return self.envelope.type


# --- kinds -------------------------------------------------------------------------------------------

UNKNOWN = "unknown"
NOISE = "noise"

# The one type → kind table (PROTOCOL.md §9). A type missing here is `unknown`.
TYPE_KINDS: dict[str, str] = {
    "session.next.prompt.admitted": "prompt:admitted",
    "session.next.prompted": "prompt:started",
    "session.next.step.started": "step:start",
    "session.next.step.ended": "step:end",
    "session.next.step.failed": "step:fail",
    "session.next.text.started": "text:start",
    "session.next.text.ended": "text:end",
    "session.next.reasoning.started": "reasoning:start",
    "session.next.reasoning.ended": "reasoning:end",
    "session.next.tool.input.started": "tool:input-start",
    "session.next.tool.input.ended": "tool:input-end",
    "session.next.tool.called": "tool:start",
    "session.next.tool.success": "tool:success",
    "session.next.tool.failed": "tool:fail",
    "session.next.agent.switched": "agent:switch",
    "session.next.model.switched": "model:switch",
    "session.next.text.delta": "delta:text",
    "session.next.reasoning.delta": "delta:reasoning",
    "session.next.tool.input.delta": "delta:tool-input",
    "permission.v2.asked": "permission:asked",
    "permission.v2.replied": "permission:replied",
    "session.created": "session:created",
    "session.deleted": "session:deleted",
    "session.updated": "session:updated",
    "server.connected": "server:connected",
    # Written by legacy-endpoint turns; they reach /api/event with durable seqs of the session but are
    # never on the durable stream, which is why that stream has seq gaps (PROTOCOL.md §3.1, §5).
    "message.updated": "legacy:message-updated",
    "message.part.updated": "legacy:part-updated",
    # Only ever seen on the legacy /event stream, which the bridge does not consume (PROTOCOL.md §4.3).
    "message.part.delta": "legacy:part-delta",
    "session.status": "legacy:session-status",
    "session.idle": "legacy:session-idle",
    "session.error": "legacy:session-error",
    "session.diff": "legacy:session-diff",
    "server.heartbeat": "server:heartbeat",
    # Process noise on /api/event (PROTOCOL.md §5): kept visible, never acted upon.
    "plugin.added": NOISE,
    "catalog.updated": NOISE,
    "reference.updated": NOISE,
    "integration.updated": NOISE,
    "file.watcher.updated": NOISE,
}

KINDS: frozenset[str] = frozenset(TYPE_KINDS.values()) | {UNKNOWN}

_NOISE_TYPES = frozenset(t for t, k in TYPE_KINDS.items() if k == NOISE)


def kind_of(event_type: str) -> str:
    return TYPE_KINDS.get(event_type, UNKNOWN)


def is_noise(event_type: str) -> bool:
    return event_type in _NOISE_TYPES


def is_delta(kind: str) -> bool:
    """Deltas are live-only and ephemeral: never stored, never carry a seq (PROTOCOL.md §3.5)."""
    return kind.startswith("delta:")


# --- parse_frame -------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON (RFC 8259); PostgreSQL jsonb refuses them and they cannot be re-encoded.
    raise ValueError(f"non-standard JSON constant {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # "1e999" would silently become inf
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def _is_int(value: object) -> TypeGuard[int]:
    # bool is a subclass of int in Python; JSON true/false must never pass for a number.
    return isinstance(value, int) and not isinstance(value, bool)


def parse_frame(data: str) -> Envelope:
    """Parse the `data:` text of one SSE event into a v2 envelope, or raise `BadFrame`."""
    try:
        obj = json.loads(data, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError; deep nesting recurses
        raise BadFrame("bad_json", str(exc)[:200]) from None
    return parse_envelope(obj)


def parse_envelope(obj: object) -> Envelope:
    """Validate an already-decoded envelope (e.g. one item of a `/history` page)."""
    if not isinstance(obj, dict):
        raise BadFrame("bad_shape", f"envelope is a {type(obj).__name__}, not an object")
    event_id, event_type = obj.get("id"), obj.get("type")
    if not isinstance(event_id, str) or not event_id:
        raise BadFrame("bad_shape", "missing or non-string id")
    if not isinstance(event_type, str) or not event_type:
        raise BadFrame("bad_shape", "missing or non-string type")
    if "data" not in obj and "properties" in obj:
        # The legacy /event envelope (PROTOCOL.md §2): ISO timestamps, no durable block. Never consumed.
        raise BadFrame("legacy_envelope", event_type)
    data = obj.get("data", {})
    if not isinstance(data, dict):
        raise BadFrame("bad_shape", f"data is a {type(data).__name__}, not an object")
    seq, version, aggregate_id = _parse_durable(obj)
    session_id = data.get("sessionID")
    if not isinstance(session_id, str):
        session_id = aggregate_id
    return Envelope(
        id=event_id,
        type=event_type,
        seq=seq,
        version=version,
        aggregate_id=aggregate_id,
        session_id=session_id,
        data=data,
        raw=obj,
    )


def _parse_durable(obj: dict[str, Any]) -> tuple[int | None, int | None, str | None]:
    if "durable" not in obj:
        return None, None, None
    durable = obj["durable"]
    if not isinstance(durable, dict):
        raise BadFrame("bad_durable", f"durable is a {type(durable).__name__}, not an object")
    seq = durable.get("seq")
    if not _is_int(seq) or seq < 0:
        raise BadFrame("bad_durable", f"seq must be an integer >= 0, got {seq!r:.40}")
    version = durable.get("version")
    if version is not None and not _is_int(version):
        raise BadFrame("bad_durable", f"version must be an integer, got {version!r:.40}")
    aggregate_id = durable.get("aggregateID")
    if aggregate_id is not None and not isinstance(aggregate_id, str):
        raise BadFrame("bad_durable", f"aggregateID must be a string, got {aggregate_id!r:.40}")
    return seq, version, aggregate_id


# --- normalize ---------------------------------------------------------------------------------------

ERROR_FALLBACK_MAX = 200


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if _is_int(value) else None


def _number(value: object) -> float | None:
    if _is_int(value):
        return float(value)
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def _obj(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def error_fallback(error_type: str | None) -> str:
    """Display text for an error without a usable message; bounded, since `type` is upstream data."""
    if error_type is None:
        return "Error"
    room = ERROR_FALLBACK_MAX - len("Error ()")
    shown = error_type if len(error_type) <= room else error_type[: room - 1] + "…"
    return f"Error ({shown})"


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
    error = _obj(data.get("error"))
    error_type = _str(error.get("type"))  # any string, "unknown" included, is kept as is
    message = _str(error.get("message"))
    if message is None:
        message = error_fallback(error_type)
    return {"error_type": error_type, "error_message": message}


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


def _permission_asked(data: dict[str, Any]) -> Fields:
    source = _obj(data.get("source"))
    return {
        "request_id": _str(data.get("id")),
        "action": _str(data.get("action")),
        "assistant_message_id": _str(source.get("messageID")),
        "call_id": _str(source.get("callID")),
    }


def _permission_replied(data: dict[str, Any]) -> Fields:
    return {"request_id": _str(data.get("requestID")), "reply": _str(data.get("reply"))}


_EXTRACTORS: dict[str, Callable[[dict[str, Any]], Fields]] = {
    "prompt:admitted": _prompt,
    "prompt:started": _prompt,
    "step:start": _step_start,
    "step:end": _step_end,
    "step:fail": _error,
    "tool:fail": _error,
    "text:end": _full_text,
    "reasoning:end": _full_text,
    "tool:input-end": _full_text,
    "delta:text": _delta,
    "delta:reasoning": _delta,
    "delta:tool-input": _delta,
    "tool:input-start": _tool_input_start,
    "tool:start": _tool_called,
    "agent:switch": _agent_switch,
    "model:switch": _model_switch,
    "permission:asked": _permission_asked,
    "permission:replied": _permission_replied,
}


def _common(data: dict[str, Any]) -> Fields:
    # These keys mean the same thing on every session.next.* type that carries them (PROTOCOL.md §9).
    part_id = _str(data.get("textID"))
    return {
        "timestamp_ms": _int(data.get("timestamp")),
        "message_id": _str(data.get("messageID")),
        "assistant_message_id": _str(data.get("assistantMessageID")),
        "part_id": part_id if part_id is not None else _str(data.get("reasoningID")),
        "call_id": _str(data.get("callID")),
    }


def normalize(env: Envelope) -> ChatEvent:
    """Map an envelope to a ChatEvent. Never raises on data content."""
    kind = kind_of(env.type)
    values = _common(env.data)
    extractor = _EXTRACTORS.get(kind)
    if extractor is not None:
        values.update({k: v for k, v in extractor(env.data).items() if v is not None})
    return ChatEvent(envelope=env, kind=kind, **values)


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
