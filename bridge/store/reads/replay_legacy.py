"""A legacy row's `event` frame built by PostgreSQL from its payload (reads; docs/websocket.md "Replay").

A legacy row (a sync-log item, docs/legacy.md) is framed in Python by `bridge.events.stored.stored_event`:
the payload mapped on its own, given the **stored** kind. Most legacy rows are a few shapes —
`message.updated` and `message.part.updated` of a text, reasoning, tool, step-finish or plain part, stored
as their milestone or as a re-send — and for those this module gives the same frame as SQL over the
payload, in the one pass `bridge.store.reads.replay` makes for v2 rows: the fields the mapping reads
(`bridge.events.legacy`: ids, agent, model, a prompt's or a text end's text, a tool's call, a failed step's
or tool's error, a finished step's tokens and cost), a re-send's fields cleared but its ids, a tool's input,
output text, duration and child session, and `data` without the text `fields.text` carries.

Anything else — another type, a content part (file, patch, synthetic text …), an unknown part, a stored
kind that is neither the payload's milestone nor a re-send, a wrong-shaped payload — gives `NULL` here and is
framed in Python, as before. `tests/integration/test_replay_frames.py` pins that both give `event_message`.
"""

from __future__ import annotations

import bridge.store.reads.sql_json as sql_json
from bridge.events import Kind
from bridge.events.error_envelope import ERROR_FALLBACK_MAX
from bridge.events.legacy_state import PLAIN_PART_TYPES

# A path is a root and keys: the root one of the sub-objects read out of the payload once per row (LATERALS:
# `data`, its `info`, `part` and the part's `state`), so that each field reads a small object by a key or
# two, not the whole payload from the top (about 30 reads per row; BENCHMARKS.md "Replay of real sessions").
Path = tuple[str, ...]
_D, _INFO, _PART, _STATE = ("lj.d",), ("lj.i",), ("lj.p",), ("lj.st",)

# Evaluated once per row, before the fields (OFFSET 0 keeps PostgreSQL from inlining them into each use, where
# each would read the payload again).
_LATERALS = """CROSS JOIN LATERAL (SELECT CASE WHEN r.legacy THEN e.payload->'data' END AS d,
    CASE WHEN r.legacy THEN e.payload #> '{data,info}' END AS i,
    CASE WHEN r.legacy THEN e.payload #> '{data,part}' END AS p,
    CASE WHEN r.legacy THEN e.payload #> '{data,part,state}' END AS st,
    CASE WHEN r.legacy THEN (e.payload #> '{data,info,role}') = '"assistant"'::jsonb END AS asst OFFSET 0) lj"""


def _at(path: Path, *keys: str) -> Path:
    return (*path, *keys)


def _j(path: Path) -> str:
    """The jsonb at `path` (NULL where a step is no object)."""
    root, keys = path[0], path[1:]
    if not keys:
        return root
    return f"({root}->'{keys[0]}')" if len(keys) == 1 else f"({root} #> '{{{','.join(keys)}}}')"


def _t(path: Path) -> str:
    """The text at `path` (a string's text, a number's digits)."""
    root, keys = path[0], path[1:]
    return f"({root}->>'{keys[0]}')" if len(keys) == 1 else f"({root} #>> '{{{','.join(keys)}}}')"


def _is(path: Path, jsonb_type: str) -> str:
    return f"(jsonb_typeof({_j(path)}) = '{jsonb_type}')"


def _str(path: Path) -> str:
    """`as_str`: the string at `path`, else NULL."""
    return f"(CASE WHEN {_is(path, 'string')} THEN {_t(path)} END)"


def _jstr(path: Path) -> str:
    """`as_str` as JSON text: a jsonb string prints as `to_json` of its text would (the same escaping), so it is
    printed as it is, not read out and escaped again."""
    return f"(CASE WHEN {_is(path, 'string')} THEN {_j(path)}::text END)"


def _int(path: Path) -> str:
    """`as_int`: the integer at `path` (jsonb, exactly as stored), else NULL; a float is no integer. A jsonb
    number prints in plain digits (never an exponent), so a point is what tells a float (no regular expression:
    it cost more than the rest of the field)."""
    return f"(CASE WHEN {_is(path, 'number')} AND strpos({_t(path)}, '.') = 0 THEN {_j(path)} END)"


def _jint(path: Path) -> str:
    """`as_int` as JSON text: the number's text, printed once."""
    return f"(CASE WHEN {_is(path, 'number')} AND strpos({_j(path)}::text, '.') = 0 THEN {_j(path)}::text END)"


def _number(path: Path) -> str:
    """`as_number`: a number a double holds, as a double, else NULL."""
    return f"(CASE WHEN {_is(path, 'number')} AND abs({_t(path)}::numeric) < 1e308 THEN {_t(path)}::float8 END)"


_ROOM = ERROR_FALLBACK_MAX - len("Error ()")


def _error(obj: Path) -> tuple[str, str]:
    """`legacy_error`: (error_type, error_message) of a `{name, data.message}` (or `{type, message}`) object."""
    etype = f"coalesce({_str(_at(obj, 'name'))}, {_str(_at(obj, 'type'))})"
    fallback = (f"CASE WHEN {etype} IS NULL THEN 'Error'"
                f" WHEN length({etype}) <= {_ROOM} THEN 'Error (' || {etype} || ')'"
                f" ELSE 'Error (' || left({etype}, {_ROOM - 1}) || '…)' END")
    message = f"coalesce({_str(_at(obj, 'data', 'message'))}, {_str(_at(obj, 'message'))}, {fallback})"
    return f"(CASE WHEN {_is(obj, 'object')} THEN {etype} END)", \
        f"(CASE WHEN {_is(obj, 'object')} THEN {message} ELSE 'Error' END)"


_RESENDS = (Kind.LEGACY_MESSAGE_UPDATED, Kind.LEGACY_PART_UPDATED)
_PLAIN = ", ".join(f"'{t}'" for t in sorted(PLAIN_PART_TYPES))
_ASSISTANT = "lj.asst"
_PROMPT = f"(e.kind = '{Kind.PROMPT_ADMITTED}' AND {_is(_at(_PART, 'messageID'), 'string')})"
_PART_TYPE = f"(CASE WHEN {_is(_at(_PART, 'type'), 'string')} THEN {_t(_at(_PART, 'type'))} END)"

# The kind `normalize_legacy` gives the payload seen first (`legacy_row_event`: a fresh state that knows the
# prompt's message when the stored kind says so); NULL: framed in Python.
FRESH = f"""CASE
    WHEN jsonb_typeof(e.payload->'data') IS DISTINCT FROM 'object'
         OR jsonb_typeof(e.payload->'id') IS DISTINCT FROM 'string'
         OR coalesce((e.payload->>'type') NOT LIKE e.type || '.%', true) THEN NULL
    WHEN e.type = 'message.updated' THEN CASE
        WHEN NOT coalesce({_ASSISTANT}, false) OR NOT coalesce({_is(_at(_INFO, 'id'), 'string')}, false)
             THEN '{Kind.LEGACY_MESSAGE_UPDATED}'
        WHEN {_is(_at(_INFO, 'error'), 'object')} THEN '{Kind.STEP_FAIL}'
        ELSE '{Kind.STEP_START}' END
    WHEN e.type = 'session.updated' THEN '{Kind.SESSION_UPDATED}'
    WHEN e.type <> 'message.part.updated' OR NOT coalesce({_is(_at(_PART, 'id'), 'string')}, false)
         OR {_j(_at(_PART, 'synthetic'))} = 'true'::jsonb THEN NULL
    ELSE CASE {_PART_TYPE}
        WHEN 'text' THEN CASE WHEN {_PROMPT} THEN '{Kind.PROMPT_ADMITTED}'
                              WHEN {_int(_at(_PART, 'time', 'end'))} IS NOT NULL THEN '{Kind.TEXT_END}'
                              ELSE '{Kind.TEXT_START}' END
        WHEN 'reasoning' THEN CASE WHEN {_PROMPT} THEN '{Kind.PROMPT_ADMITTED}'
                                   WHEN {_int(_at(_PART, 'time', 'end'))} IS NOT NULL THEN '{Kind.REASONING_END}'
                                   ELSE '{Kind.REASONING_START}' END
        WHEN 'tool' THEN CASE {_j(_at(_STATE, 'status'))}
            WHEN '"pending"' THEN '{Kind.TOOL_INPUT_START}' WHEN '"running"' THEN '{Kind.TOOL_START}'
            WHEN '"completed"' THEN '{Kind.TOOL_SUCCESS}' WHEN '"error"' THEN '{Kind.TOOL_FAIL}'
            ELSE '{Kind.LEGACY_PART_UPDATED}' END
        WHEN 'step-finish' THEN '{Kind.STEP_END}'
        ELSE CASE WHEN {_PART_TYPE} IN ({_PLAIN}) THEN '{Kind.LEGACY_PART_UPDATED}' END END
END"""

# Framed here: the stored kind is the payload's milestone, or a re-send of it.
BY_SQL = f"(lf.fresh IS NOT NULL AND (e.kind = lf.fresh OR e.kind IN ('{_RESENDS[0]}', '{_RESENDS[1]}')))"
# What a re-send does not repeat (bridge.events.stored._CLEARED): shown only when the stored kind is the milestone.
_SAID = "(e.kind = lf.fresh)"

_MU = "e.type = 'message.updated'"
_IS_TOOL = f"{_j(_at(_PART, 'type'))} = '\"tool\"'::jsonb"
_REVERT = _at(_INFO, "revert")
_STEP_ERR = _error(_at(_INFO, "error"))
_TOOL_ERR = _error(_at(_STATE, "error"))
_TOOL_ERROR_MESSAGE = f"CASE WHEN {_is(_at(_STATE, 'error'), 'string')} THEN {_t(_at(_STATE, 'error'))} " \
                      f"ELSE {_TOOL_ERR[1]} END"
_TOKENS = _at(_PART, "tokens")
_SPAN = _at(_STATE, "time")
# content_fields: a tool's child session, read from the part (or, for another type, from `data`).
_CHILD_KINDS = "e.kind IN (" + ", ".join(f"'{k}'" for k in (Kind.TOOL_START, Kind.TOOL_SUCCESS, Kind.TOOL_FAIL,
                                                              Kind.LEGACY_PART_UPDATED)) + ")"

# fields.text: a prompt's or a text end's text.
TEXT = f"""CASE WHEN {_SAID} AND lf.fresh IN ('{Kind.PROMPT_ADMITTED}', '{Kind.TEXT_END}', '{Kind.REASONING_END}')
    THEN {_str(_at(_PART, 'text'))} END"""


def _when(cond: str, expr: str) -> str:
    return f"CASE WHEN {cond} THEN {expr} END"


def _said(*kinds: Kind) -> str:
    """The stored kind is this milestone (a re-send says none of it): `lt.said` is the milestone, else NULL."""
    return f"lt.said IN ({', '.join(repr(str(k)) for k in kinds)})"


def _data_child() -> tuple[str, str]:
    return "child_session_id", _when(_CHILD_KINDS, _jstr(_at(_D, "state", "metadata", "sessionId")))


# The fields per type, as `bridge.events.legacy` reads them (docs/legacy.md, "Kind table").
_MESSAGE = sql_json.obj([
    ("timestamp_ms", f"coalesce({_jint(_at(_INFO, 'time', 'completed'))}, {_jint(_at(_INFO, 'time', 'created'))})"),
    (None, f"""CASE WHEN {_ASSISTANT} THEN {sql_json.members([("message_id", _jstr(_at(_INFO, "parentID"))),
                                                              ("assistant_message_id", _jstr(_at(_INFO, "id")))])}
        ELSE '"message_id":' || {_jstr(_at(_INFO, "id"))} END"""),
    (None, _when(_said(Kind.STEP_FAIL), sql_json.members([("error_type", sql_json.value(_STEP_ERR[0])),
                                                         ("error_message", sql_json.value(_STEP_ERR[1]))]))),
    ("agent", _jstr(_at(_INFO, "agent"))),
    (None, f"""CASE WHEN {_ASSISTANT} THEN {sql_json.members([("model_id", _jstr(_at(_INFO, "modelID"))),
                                                              ("provider_id", _jstr(_at(_INFO, "providerID")))])}
        ELSE {sql_json.members([("model_id", _jstr(_at(_INFO, "model", "modelID"))),
                                ("provider_id", _jstr(_at(_INFO, "model", "providerID")))])} END"""),
    _data_child(),
])

_SESSION = f"e.kind = '{Kind.SESSION_UPDATED}'"
_SESSION_FIELDS = sql_json.obj([
    ("timestamp_ms", _jint(_at(_INFO, "time", "updated"))),
    _data_child(),
    ("title", _when(_SESSION, _jstr(_at(_INFO, "title")))),
    ("parent_id", _when(_SESSION, _jstr(_at(_INFO, "parentID")))),
    ("revert", _when(f"{_SESSION} AND {_is(_REVERT, 'object')}",
                     sql_json.obj([("message_id", _jstr(_at(_REVERT, "messageID"))),
                                   ("part_id", _jstr(_at(_REVERT, "partID")))]))),
])

# A part's fields come in groups, each chosen by one CASE (its members together, `sql_json.members`), so a
# row evaluates only the fields its milestone has: a part is one of these, never all of them.
_DURATION = ("duration_ms", sql_json.value(
    _when(f"{_int(_at(_SPAN, 'start'))} IS NOT NULL AND {_int(_at(_SPAN, 'end'))} IS NOT NULL",
          f"{_t(_at(_SPAN, 'end'))}::numeric - {_t(_at(_SPAN, 'start'))}::numeric")))
_SAID_FIELDS = f"""CASE lt.said
    WHEN '{Kind.TOOL_FAIL}' THEN {sql_json.members([("error_type", sql_json.value(_TOOL_ERR[0])),
                                                     ("error_message", sql_json.value(_TOOL_ERROR_MESSAGE))])}
    WHEN '{Kind.STEP_END}' THEN {sql_json.members([
        ("finish", _jstr(_at(_PART, "reason"))),
        ("tokens_input", _jint(_at(_TOKENS, "input"))),
        ("tokens_output", _jint(_at(_TOKENS, "output"))),
        ("tokens_reasoning", _jint(_at(_TOKENS, "reasoning"))),
        ("tokens_cache_read", _jint(_at(_TOKENS, "cache", "read"))),
        ("tokens_cache_write", _jint(_at(_TOKENS, "cache", "write"))),
        ("cost", sql_json.value(_number(_at(_PART, "cost"))))])} END"""
_TOOL_ENDED = f"""CASE lt.said
    WHEN '{Kind.TOOL_SUCCESS}' THEN {sql_json.members([("output_text", _jstr(_at(_STATE, "output"))), _DURATION])}
    WHEN '{Kind.TOOL_FAIL}' THEN {sql_json.members([_DURATION])} END"""
_IDS = f"""CASE WHEN {_PROMPT} THEN '"message_id":' || {_jstr(_at(_PART, "messageID"))}
    ELSE '"assistant_message_id":' || {_jstr(_at(_PART, "messageID"))} END"""
_TOOL_IDS = _when(_IS_TOOL, sql_json.members([("call_id", _jstr(_at(_PART, "callID"))),
                                              ("tool_name", _jstr(_at(_PART, "tool")))]))
_PART_FIELDS = sql_json.obj([
    ("timestamp_ms", _jint(_at(_D, "time"))),
    (None, _IDS),
    ("part_id", _jstr(_at(_PART, "id"))),
    (None, _TOOL_IDS),
    (None, _SAID_FIELDS),
    ("text", sql_json.value("lt.text")),
    (None, _TOOL_ENDED),
    ("child_session_id", _when(_CHILD_KINDS, _jstr(_at(_STATE, "metadata", "sessionId")))),
    ("input", sql_json.jsonb(_when(f"{_said(Kind.TOOL_START, Kind.TOOL_SUCCESS, Kind.TOOL_FAIL)} "
                                   f"AND NOT {_is(_at(_STATE, 'input'), 'null')}", _j(_at(_STATE, "input"))))),
])

FIELDS = f"""CASE e.type WHEN 'message.updated' THEN {_MESSAGE} WHEN 'session.updated' THEN {_SESSION_FIELDS}
    ELSE {_PART_FIELDS} END"""

# data without the part's text when fields.text carries it (LegacyChatEvent.data_without_text).
DATA = f"""CASE WHEN lt.text IS NOT NULL AND {_is(_at(_PART, 'text'), 'string')} AND {_t(_at(_PART, 'text'))} = lt.text
            THEN jsonb_set(lj.d, '{{part}}', {_j(_PART)} - 'text') ELSE lj.d END"""

# The legacy row's laterals for bridge.store.reads.replay (after its `r.legacy`): the sub-objects, the milestone
# kind (`lf.fresh`), fields.text and the milestone when the row is stored as it (`lt.said`; NULL: a re-send).
LATERALS = f"""{_LATERALS}
CROSS JOIN LATERAL (SELECT CASE WHEN r.legacy THEN {FRESH} END AS fresh OFFSET 0) lf
CROSS JOIN LATERAL (SELECT CASE WHEN r.legacy THEN {TEXT} END AS text,
                           CASE WHEN r.legacy AND e.kind = lf.fresh THEN lf.fresh END AS said OFFSET 0) lt"""
