"""The conversation of a session, rebuilt from its stored events only. Pure.

`build_transcript(rows)` reads nothing but the stored envelopes (`payload`), their `kind` and `seq`, so the
transcript is the same whether it is built while the turn is live, replayed next year, or rebuilt from
an `export` file. Entries, in seq order:

- `user`: a prompt (`prompt:admitted`) with its delivery and whether/when it was taken into the loop
  (`prompt:started`, `started_seq`);
- `assistant`: one model step (`step:start` … `step:end`/`step:fail`) with its parts in order — text,
  reasoning, tool calls (input, output, error, status) — and the step's finish, tokens, cost and error;
- `agent_switch` / `model_switch`.

A call of the `question` tool also carries `question` (`add_question`): the bridge's record of who answered
it, what and when (docs/upstream.md §18: upstream keeps none of that but the tool's output text).

Interrupts have no event of their own upstream (docs/upstream.md §4.2): a step or tool that failed with the
upstream's interrupt message is flagged `interrupted`; the error itself is kept verbatim either way.
A step that never ended (killed server, cut stream) has `complete: false`. Upstream fields are read
through the mapping layer (`bridge.events.stored.stored_event`), never by name here, so a turn driven through the
legacy API (docs/legacy.md) gives the same entries as a v2 turn: its prompt is taken when its first step
starts, its tool calls carry their input from whichever event first shows it, and its re-sent updates add
nothing. A tool's `duration_ms` is the time it ran, from the event that reports it (a legacy part) or
from the timestamps of its start and end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bridge.audit.transcript_content import AFTER_HANDLERS, CONTENT_HANDLERS, ContentMarks, apply_marks
from bridge.events import ChatEvent, Kind
from bridge.events.stored import stored_event

Entry = dict[str, Any]


class _Builder:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.prompts: dict[str, Entry] = {}
        self.steps: dict[str, Entry] = {}
        self.tools: dict[str, Entry] = {}
        self.texts: dict[tuple[str, str], Entry] = {}
        self.content = ContentMarks()  # removal and undo (bridge.audit.transcript_content)

    def step(self, message_id: str | None, seq: int) -> Entry:
        key = str(message_id)
        entry = self.steps.get(key)
        if entry is None:  # a part whose step.started is missing (history before the mirror began)
            entry = {"type": "assistant", "message_id": message_id, "seq": seq, "agent": None, "model": None,
                     "parts": [], "finish": None, "tokens": None, "cost": None, "error": None,
                     "interrupted": False, "complete": False}
            self.steps[key] = entry
            self.entries.append(entry)
        return entry

    def add(self, seq: int, kind: str, ev: ChatEvent) -> None:
        handler = _HANDLERS.get(kind)  # a Kind equals its stored string
        if handler is not None:
            handler(self, seq, ev)
        after = AFTER_HANDLERS.get(kind)
        if after is not None:
            after(self, seq, ev)

    def _prompt_admitted(self, seq: int, ev: ChatEvent) -> None:
        placeholder = self.prompts.get(str(ev.message_id))
        if placeholder is not None and placeholder["text"] is None:  # its attachments came first
            placeholder.update(text=ev.text, delivery=ev.delivery, time_ms=ev.timestamp_ms)
            return
        entry: Entry = {"type": "user", "message_id": ev.message_id, "seq": seq, "text": ev.text,
                        "delivery": ev.delivery, "started_seq": None, "time_ms": ev.timestamp_ms}
        self.prompts[str(ev.message_id)] = entry
        self.entries.append(entry)

    def _prompt_started(self, seq: int, ev: ChatEvent) -> None:
        entry = self.prompts.get(str(ev.message_id))
        if entry is None:
            self._prompt_admitted(seq, ev)
            entry = self.prompts[str(ev.message_id)]
        entry["started_seq"] = seq

    def _step_start(self, seq: int, ev: ChatEvent) -> None:
        entry = self.step(ev.assistant_message_id, seq)
        entry.update(agent=ev.agent, model=ev.model, time_ms=ev.timestamp_ms)
        prompt = self.prompts.get(str(ev.message_id)) if ev.message_id is not None else None
        if prompt is not None and prompt["started_seq"] is None:  # a legacy turn has no prompt:started
            prompt["started_seq"] = seq

    def _step_end(self, seq: int, ev: ChatEvent) -> None:
        entry = self.step(ev.assistant_message_id, seq)
        entry.update(finish=ev.finish, tokens=ev.tokens, cost=ev.reported_cost, complete=True, end_seq=seq)

    def _step_fail(self, seq: int, ev: ChatEvent) -> None:
        entry = self.step(ev.assistant_message_id, seq)
        entry.update(finish="error", error=ev.error, complete=True, end_seq=seq)
        entry["interrupted"] = entry["interrupted"] or ev.interrupted

    def _part(self, kind: str, seq: int, ev: ChatEvent) -> Entry:
        key = (kind, str(ev.part_id))
        part = self.texts.get(key)
        if part is None:
            part = {"type": kind, "id": ev.part_id, "text": None, "complete": False}
            self.texts[key] = part
            self.step(ev.assistant_message_id, seq)["parts"].append(part)
        return part

    def _text_start(self, seq: int, ev: ChatEvent) -> None:
        self._part("text", seq, ev)

    def _text_end(self, seq: int, ev: ChatEvent) -> None:
        self._part("text", seq, ev).update(text=ev.text, complete=True)

    def _reasoning_start(self, seq: int, ev: ChatEvent) -> None:
        self._part("reasoning", seq, ev)

    def _reasoning_end(self, seq: int, ev: ChatEvent) -> None:
        self._part("reasoning", seq, ev).update(text=ev.text, complete=True)

    def _tool(self, seq: int, ev: ChatEvent) -> Entry:
        call_id = str(ev.call_id)
        tool = self.tools.get(call_id)
        if tool is None:
            tool = {"type": "tool", "call_id": ev.call_id, "tool": ev.tool_name,
                    "input": None, "input_text": None, "status": "pending", "output": None,
                    "output_text": None, "structured": None, "error": None, "interrupted": False,
                    "started_ms": None, "ended_ms": None, "duration_ms": None}
            self.tools[call_id] = tool
            self.step(ev.assistant_message_id, seq)["parts"].append(tool)
        return tool

    def _tool_input_start(self, seq: int, ev: ChatEvent) -> None:
        self._tool(seq, ev)

    def _tool_input_end(self, seq: int, ev: ChatEvent) -> None:
        self._tool(seq, ev)["input_text"] = ev.text

    def _tool_start(self, seq: int, ev: ChatEvent) -> None:
        tool = self._tool(seq, ev)
        tool.update(tool=ev.tool_name or tool["tool"], input=ev.tool_input, status="running")
        _timed(tool, ev, start=True)

    def _tool_end(self, seq: int, ev: ChatEvent) -> Entry:
        tool = self._tool(seq, ev)
        if tool["input"] is None:  # a call first seen ended (legacy) still shows its input
            tool["input"] = ev.tool_input
        tool["tool"] = tool["tool"] or ev.tool_name
        _timed(tool, ev, start=False)
        return tool

    def _tool_success(self, seq: int, ev: ChatEvent) -> None:
        self._tool_end(seq, ev).update(status="success", output=ev.tool_content, output_text=ev.tool_output_text,
                                       structured=ev.tool_structured)

    def _tool_fail(self, seq: int, ev: ChatEvent) -> None:
        self._tool_end(seq, ev).update(status="failed", error=ev.error, interrupted=ev.interrupted,
                                       output=ev.tool_result)
        if ev.interrupted:
            self.step(ev.assistant_message_id, seq)["interrupted"] = True

    def _agent_switch(self, seq: int, ev: ChatEvent) -> None:
        self.entries.append({"type": "agent_switch", "seq": seq, "agent": ev.agent})

    def _model_switch(self, seq: int, ev: ChatEvent) -> None:
        self.entries.append({"type": "model_switch", "seq": seq, "model": ev.switched_model})


def _timed(tool: Entry, ev: ChatEvent, *, start: bool) -> None:
    span = ev.tool_span_ms
    if span is not None:
        tool["started_ms"] = span[0] if span[0] is not None else tool["started_ms"]
        tool["ended_ms"] = span[1] if span[1] is not None else tool["ended_ms"]
    elif start:
        tool["started_ms"] = ev.timestamp_ms
    else:
        tool["ended_ms"] = ev.timestamp_ms
    begun, ended = tool["started_ms"], tool["ended_ms"]
    tool["duration_ms"] = ended - begun if begun is not None and ended is not None and ended >= begun else None


_HANDLERS: dict[str, Callable[[_Builder, int, ChatEvent], None]] = {
    Kind.PROMPT_ADMITTED: _Builder._prompt_admitted,
    Kind.PROMPT_STARTED: _Builder._prompt_started,
    Kind.STEP_START: _Builder._step_start,
    Kind.STEP_END: _Builder._step_end,
    Kind.STEP_FAIL: _Builder._step_fail,
    Kind.TEXT_START: _Builder._text_start,
    Kind.TEXT_END: _Builder._text_end,
    Kind.REASONING_START: _Builder._reasoning_start,
    Kind.REASONING_END: _Builder._reasoning_end,
    Kind.TOOL_INPUT_START: _Builder._tool_input_start,
    Kind.TOOL_INPUT_END: _Builder._tool_input_end,
    Kind.TOOL_START: _Builder._tool_start,
    Kind.TOOL_SUCCESS: _Builder._tool_success,
    Kind.TOOL_FAIL: _Builder._tool_fail,
    Kind.AGENT_SWITCH: _Builder._agent_switch,
    Kind.MODEL_SWITCH: _Builder._model_switch,
    **CONTENT_HANDLERS,
}


class TranscriptBuilder:
    """The same transcript built one row at a time, rows in seq order (the HTTP API streams a session's
    rows through it instead of loading them all)."""

    def __init__(self) -> None:
        self._b = _Builder()

    def add(self, row: Mapping[str, Any]) -> None:
        kind = str(row["kind"])
        ev = stored_event(row.get("payload"), kind)
        self._b.add(int(row["seq"]), kind, ev)
        if row.get("asked_by") is not None:  # a prompt sent through the bridge: its token's subject
            entry = self._b.prompts.get(str(ev.message_id))
            if entry is not None:
                entry["asked_by"] = row["asked_by"]

    def add_question(self, question: Mapping[str, Any]) -> None:
        """A question of the `question` tool as the pending-requests table keeps it (docs/audit.md): put on
        its tool call as `question` (request id, state, answers, who answered and when). Upstream keeps
        the answer only in the tool's output text; who gave it is the bridge's own record."""
        tool = self._b.tools.get(str(question.get("call_id")))
        if tool is not None:
            tool["question"] = {k: question.get(k) for k in ("request_id", "state", "answers", "answered_by",
                                                             "asked_at", "answered_at")}

    @property
    def entries(self) -> list[Entry]:
        apply_marks(self._b.entries, self._b.content)
        return self._b.entries


def build_transcript(rows: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """`rows`: stored events with at least `seq`, `kind` and `payload` (the envelope), any order."""
    b = TranscriptBuilder()
    for row in sorted(rows, key=lambda r: int(r["seq"])):
        b.add(row)
    return b.entries
