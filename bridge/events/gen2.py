"""OpenCode 2.x's event vocabulary → the kinds and fields a client sees today, pure (docs/upstream.md
"OpenCode 2.x", "Vocabulary"). Read from
`packages/schema/src/session-event.ts@03130971e20a847d77cd70e13faabca0de4f512d`,
`packages/schema/src/form.ts@23699db9682c24c6217d86ea1133bfb20b08d769`,
`packages/schema/src/event-log.ts@2d6e2bb6e22492db1138f4f3ffe0781abb045f45` and the 2.x test fake
`packages/cli/test/acp/wire-fixture.ts@1fb51e4ab10be0adacf54a917950ec60a03995af` of `anomalyco/opencode`;
not checked against a running 2.x serve.

- The envelope is the one bridge.events.envelope parses (`{id, type, durable{aggregateID, seq, version},
  data}`, plus `created` and `location`), stored exactly as received; `data.sessionID` may be absent (the
  aggregate is the session).
- Types lost 1.x's `session.next.` prefix; `GEN2_KINDS` maps each to the 1.x kind of the same meaning.
  `text.*`/`reasoning.*` are keyed by `ordinal` within an assistant message: their `part_id` is
  `<assistantMessageID>#<ordinal>` (deltas carry the same pair, so a client pairs them as it pairs 1.x
  part ids). A tool call's id is `callID` (session-event.ts) or `id` (the test fake): both are read.
- Forms replace questions: `form.created` → `question:asked`, `form.replied` → `question:replied`,
  `form.cancelled` → `question:rejected` (request id = the form id). A reply given as a question's answers
  (one list per question) becomes the form's `{answer: {field key: value}}` by `form_answer`.
- The turn ends with an event at last: `session.execution.started` → busy, `.succeeded`/`.failed`/
  `.interrupted` → idle (`turn_signal`); they are stored as `noise` (no 1.x kind means it: 1.x clients see
  the turn through status frames, which these drive).
- Log markers (`log.caught_up`, `log.synced`: no `id`, no event) are recognised by `log_marker` and never
  stored.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from bridge.errors import BadFrame
from bridge.events.chat import ChatEvent
from bridge.events.envelope import Envelope, parse_frame
from bridge.events.fields import as_int, as_obj, as_str
from bridge.events.kinds import Kind
from bridge.events.normalize import normalize
from bridge.perf.jsonload import strict_decode

GEN2_KINDS: dict[str, Kind] = {
    "session.input.admitted": Kind.PROMPT_ADMITTED,
    "session.input.promoted": Kind.PROMPT_STARTED,
    "session.inbox.delivered": Kind.PROMPT_STARTED,
    "session.step.started": Kind.STEP_START,
    "session.step.ended": Kind.STEP_END,
    "session.step.failed": Kind.STEP_FAIL,
    "session.text.started": Kind.TEXT_START,
    "session.text.delta": Kind.DELTA_TEXT,
    "session.text.ended": Kind.TEXT_END,
    "session.reasoning.started": Kind.REASONING_START,
    "session.reasoning.delta": Kind.DELTA_REASONING,
    "session.reasoning.ended": Kind.REASONING_END,
    "session.tool.input.started": Kind.TOOL_INPUT_START,
    "session.tool.input.delta": Kind.DELTA_TOOL_INPUT,
    "session.tool.input.ended": Kind.TOOL_INPUT_END,
    "session.tool.called": Kind.TOOL_START,
    "session.tool.success": Kind.TOOL_SUCCESS,
    "session.tool.failed": Kind.TOOL_FAIL,
    "session.tool.progress": Kind.NOISE,
    "session.agent.selected": Kind.AGENT_SWITCH,
    "session.model.selected": Kind.MODEL_SWITCH,
    "session.retry.scheduled": Kind.RETRY,
    "session.synthetic": Kind.PROMPT_SYNTHETIC,
    "session.shell.started": Kind.SHELL_START,
    "session.shell.ended": Kind.SHELL_END,
    "session.compaction.started": Kind.COMPACTION_START,
    "session.compaction.delta": Kind.DELTA_COMPACTION,
    "session.compaction.ended": Kind.COMPACTION_END,
    "session.revert.staged": Kind.REVERT_STAGED,
    "session.revert.cleared": Kind.REVERT_CLEARED,
    "session.revert.committed": Kind.REVERT_COMMITTED,
    "session.moved": Kind.SESSION_MOVED,
    "session.renamed": Kind.SESSION_UPDATED,
    "session.created": Kind.SESSION_CREATED,
    "session.deleted": Kind.SESSION_DELETED,
    "session.execution.started": Kind.NOISE,
    "session.execution.succeeded": Kind.NOISE,
    "session.execution.failed": Kind.NOISE,
    "session.execution.interrupted": Kind.NOISE,
    "session.usage.updated": Kind.NOISE,
    "permission.asked": Kind.PERMISSION_ASKED,
    "permission.replied": Kind.PERMISSION_REPLIED,
    "form.created": Kind.QUESTION_ASKED,
    "form.replied": Kind.QUESTION_REPLIED,
    "form.cancelled": Kind.QUESTION_REJECTED,
    "server.connected": Kind.SERVER_CONNECTED,
}
TURN_BUSY = frozenset({"session.execution.started"})
TURN_IDLE = frozenset({"session.execution.succeeded", "session.execution.failed", "session.execution.interrupted"})
LOG_MARKERS = frozenset({"log.caught_up", "log.synced"})


def log_marker(data: str) -> dict[str, Any] | None:
    """A log read's replay-to-live marker (`{type: "log.caught_up"|"log.synced", aggregateID, seq?}`), else None."""
    if '"log.' not in data:
        return None
    try:
        obj = strict_decode(data)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) and obj.get("type") in LOG_MARKERS else None


def parse_log_item(data: str) -> Envelope | None:
    """One `data:` of a 2.x log read: an envelope, None for a marker, BadFrame for anything else."""
    if log_marker(data) is not None:
        return None
    return parse_frame(data)


def turn_signal(event_type: str) -> bool | None:
    """True: a turn runs from here; False: the turn is over; None: this event says neither."""
    if event_type in TURN_BUSY:
        return True
    if event_type in TURN_IDLE:
        return False
    return None


def _part_id(data: dict[str, Any]) -> str | None:
    amid, ordinal = as_str(data.get("assistantMessageID")), as_int(data.get("ordinal"))
    return f"{amid}#{ordinal}" if amid is not None and ordinal is not None else None


def _fields(kind: Kind, data: dict[str, Any]) -> dict[str, Any]:
    """What 2.x spells differently from 1.x, as ChatEvent fields (the rest `normalize` reads alike)."""
    out: dict[str, Any] = {}
    if kind in (Kind.PROMPT_ADMITTED, Kind.PROMPT_STARTED):
        inp = as_obj(data.get("input"))
        out["text"] = (as_str(inp.get("text")) or as_str(as_obj(inp.get("payload")).get("text"))
                       or as_str(as_obj(inp.get("prompt")).get("text")))
        out["delivery"] = as_str(inp.get("delivery")) or as_str(data.get("delivery"))
        out["message_id"] = as_str(data.get("inputID")) or as_str(data.get("inboxID"))
    elif kind in (Kind.TOOL_INPUT_START, Kind.TOOL_INPUT_END, Kind.DELTA_TOOL_INPUT, Kind.TOOL_START,
                  Kind.TOOL_SUCCESS, Kind.TOOL_FAIL):
        out["call_id"] = as_str(data.get("callID")) or as_str(data.get("id"))
    elif kind in (Kind.QUESTION_ASKED, Kind.QUESTION_REPLIED, Kind.QUESTION_REJECTED):
        form = as_obj(data.get("form"))
        out["request_id"] = as_str(form.get("id")) or as_str(data.get("id"))
    elif kind is Kind.PERMISSION_REPLIED:
        out["reply"] = as_str(data.get("reply")) or as_str(data.get("decision"))
    elif kind is Kind.SESSION_UPDATED:
        out["text"] = as_str(data.get("title"))
    if kind in (Kind.TEXT_START, Kind.TEXT_END, Kind.DELTA_TEXT, Kind.REASONING_START, Kind.REASONING_END,
                Kind.DELTA_REASONING):
        out["part_id"] = _part_id(data)
    return {k: v for k, v in out.items() if v is not None}


# 2.x types whose `data` reads like a 1.x type's: normalized as that type (then given the 2.x kind).
GEN1_TWINS: dict[str, str] = {
    "session.step.started": "session.next.step.started",
    "session.step.ended": "session.next.step.ended",
    "session.step.failed": "session.next.step.failed",
    "session.text.ended": "session.next.text.ended",
    "session.text.delta": "session.next.text.delta",
    "session.reasoning.ended": "session.next.reasoning.ended",
    "session.reasoning.delta": "session.next.reasoning.delta",
    "session.tool.input.started": "session.next.tool.input.started",
    "session.tool.input.delta": "session.next.tool.input.delta",
    "session.tool.input.ended": "session.next.tool.input.ended",
    "session.tool.failed": "session.next.tool.failed",
    "session.agent.selected": "session.next.agent.switched",
    "session.model.selected": "session.next.model.switched",
    "session.synthetic": "session.next.synthetic",
    "permission.asked": "permission.v2.asked",
    "permission.replied": "permission.v2.replied",
}


def normalize_gen2(env: Envelope) -> ChatEvent:
    """A 2.x envelope → the ChatEvent a 1.x event of the same meaning gives. Never raises on data content."""
    kind = GEN2_KINDS.get(env.type, Kind.UNKNOWN)
    if env.session_id is None and isinstance(env.data.get("form"), dict):
        owner = as_str(env.data["form"].get("sessionID"))  # `form.created` names its session in the form
        env = replace(env, session_id=owner) if owner else env
    twin = GEN1_TWINS.get(env.type)
    base = normalize(replace(env, type=twin) if twin is not None else env)
    values = {f.name: getattr(base, f.name) for f in fields(ChatEvent)}
    values["envelope"], values["kind"] = env, kind
    created = env.raw.get("created")
    if values["timestamp_ms"] is None and isinstance(created, int) and not isinstance(created, bool):
        values["timestamp_ms"] = created
    values.update(_fields(kind, env.data))
    return ChatEvent(**values)


def normalize_any(env: Envelope) -> ChatEvent:
    """Either generation's envelope: a 2.x type (no `session.next.` prefix, in GEN2_KINDS) by
    `normalize_gen2`, anything else as before."""
    if env.type in GEN2_KINDS and env.type not in _SHARED_TYPES:
        return normalize_gen2(env)
    return normalize(env)


# Types both generations use with the same data: normalized by the 1.x rules.
_SHARED_TYPES = frozenset({"server.connected"})


def _options(field: dict[str, Any]) -> list[dict[str, Any]]:
    if field.get("type") == "boolean":
        return [{"label": "true", "value": True}, {"label": "false", "value": False}]
    raw = field.get("options")
    return [o for o in raw if isinstance(o, dict) and isinstance(o.get("label"), str)] if isinstance(raw, list) else []


def form_questions(form: dict[str, Any]) -> list[dict[str, Any]]:
    """A form's fields as the questions a client answers today (`{question, header, options[{label,
    description}], multiple, custom}`): a field's title (else description, else key) is the question, its
    options' labels the choices (`true`/`false` for a boolean), `multiselect` takes several, and free text
    is allowed where the field takes it (`custom`, or a field without options)."""
    out = []
    for field in (as_obj(f) for f in form.get("fields", []) if isinstance(form.get("fields"), list)):
        options = _options(field)
        key = as_str(field.get("key")) or ""
        out.append({"question": as_str(field.get("title")) or as_str(field.get("description")) or key,
                    "header": key,
                    "options": [{"label": o["label"], **({"description": o["description"]}
                                                          if isinstance(o.get("description"), str) else {})}
                                for o in options],
                    "multiple": field.get("type") == "multiselect",
                    "custom": field.get("custom") is True or (not options and field.get("type") != "boolean")})
    return out


def _value(field: dict[str, Any], chosen: str) -> Any:
    """A chosen label as the field's value (the option's `value`), else the typed text as the field's type."""
    for o in _options(field):
        if o["label"] == chosen:
            return o.get("value", chosen)
    kind = field.get("type")
    try:
        if kind == "integer":
            return int(chosen)
        if kind == "number":
            return float(chosen)
    except ValueError:
        raise BadFrame("bad_answer", f"field {field.get('key')!r} takes a {kind}, not {chosen[:40]!r}") from None
    return chosen


def form_answer(form: dict[str, Any], answers: list[list[str]]) -> dict[str, Any]:
    """A question's answers (one list of chosen labels or typed texts per question, in order) as the form's
    `answer`: field key → value (a list for `multiselect`, else the one choice; a label becomes its option's
    value); `BadFrame` when they do not fit."""
    fields = [as_obj(f) for f in form.get("fields", [])] if isinstance(form.get("fields"), list) else []
    if len(answers) != len(fields):
        raise BadFrame("bad_answer", f"{len(answers)} answers for a form of {len(fields)} fields")
    out: dict[str, Any] = {}
    for field, chosen in zip(fields, answers, strict=True):
        key = as_str(field.get("key"))
        if key is None:
            raise BadFrame("bad_answer", "a form field without a key")
        if field.get("type") == "multiselect":
            out[key] = [_value(field, c) for c in chosen]
        elif len(chosen) != 1:
            raise BadFrame("bad_answer", f"field {key!r} takes one answer, not {len(chosen)}")
        else:
            out[key] = _value(field, chosen[0])
    return out
