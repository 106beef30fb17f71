"""The conversation of a session, rebuilt from its stored events only. Pure.

`build_transcript(rows)` reads nothing but the stored envelopes (`payload`) and their `seq`, so the
transcript is the same whether it is built while the turn is live, replayed next year, or rebuilt from
an `export` file. Entries, in seq order:

- `user`: a prompt (`prompt:admitted`) with its delivery and whether/when it was taken into the loop
  (`prompt:started`, `started_seq`);
- `assistant`: one model step (`step:start` … `step:end`/`step:fail`) with its parts in order — text,
  reasoning, tool calls (input, output, error, status) — and the step's finish, tokens, cost and error;
- `agent_switch` / `model_switch`.

Interrupts have no event of their own upstream (PROTOCOL.md §4.2): a step or tool that failed with the
upstream's interrupt message is flagged `interrupted`; the error itself is kept verbatim either way.
A step that never ended (killed server, cut stream) has `complete: false`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# The exact messages opencode 1.18.33 uses for an interrupt (PROTOCOL.md §4.2).
INTERRUPT_MESSAGES = frozenset({"Provider turn interrupted", "Tool execution interrupted"})

Entry = dict[str, Any]


def _data(row: Mapping[str, Any]) -> dict[str, Any]:
    payload = row.get("payload")
    data = payload.get("data") if isinstance(payload, Mapping) else None
    return dict(data) if isinstance(data, Mapping) else {}


def _interrupted(error: Any) -> bool:
    return isinstance(error, Mapping) and error.get("message") in INTERRUPT_MESSAGES


def _output_text(content: Any, structured: Any) -> str | None:
    """The text parts of the result; tools that return no text parts (e.g. `read`) carry their output in
    `structured.content`."""
    texts = [c.get("text") for c in content if isinstance(c, Mapping) and c.get("type") == "text"] \
        if isinstance(content, list) else []
    joined = "".join(t for t in texts if isinstance(t, str))
    if not joined and isinstance(structured, Mapping) and isinstance(structured.get("content"), str):
        return str(structured["content"])
    return joined if isinstance(content, list) else None


class _Builder:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.prompts: dict[str, Entry] = {}
        self.steps: dict[str, Entry] = {}
        self.tools: dict[str, Entry] = {}
        self.texts: dict[tuple[str, str], Entry] = {}

    def step(self, message_id: Any, seq: int) -> Entry:
        key = str(message_id)
        entry = self.steps.get(key)
        if entry is None:  # a part whose step.started is missing (history before the mirror began)
            entry = {"type": "assistant", "message_id": message_id, "seq": seq, "agent": None, "model": None,
                     "parts": [], "finish": None, "tokens": None, "cost": None, "error": None,
                     "interrupted": False, "complete": False}
            self.steps[key] = entry
            self.entries.append(entry)
        return entry

    def add(self, seq: int, kind: str, d: dict[str, Any]) -> None:
        handler = getattr(self, "_" + kind.replace(":", "_").replace("-", "_"), None)
        if handler is not None:
            handler(seq, d)

    def _prompt_admitted(self, seq: int, d: dict[str, Any]) -> None:
        prompt = d.get("prompt")
        entry: Entry = {"type": "user", "message_id": d.get("messageID"), "seq": seq,
                        "text": prompt.get("text") if isinstance(prompt, Mapping) else None,
                        "delivery": d.get("delivery"), "started_seq": None, "time_ms": d.get("timestamp")}
        self.prompts[str(d.get("messageID"))] = entry
        self.entries.append(entry)

    def _prompt_started(self, seq: int, d: dict[str, Any]) -> None:
        entry = self.prompts.get(str(d.get("messageID")))
        if entry is None:
            self._prompt_admitted(seq, d)
            entry = self.prompts[str(d.get("messageID"))]
        entry["started_seq"] = seq

    def _step_start(self, seq: int, d: dict[str, Any]) -> None:
        model = d.get("model")
        entry = self.step(d.get("assistantMessageID"), seq)
        entry["agent"] = d.get("agent")
        entry["model"] = ({"provider": model.get("providerID"), "id": model.get("id")}
                          if isinstance(model, Mapping) else None)
        entry["time_ms"] = d.get("timestamp")

    def _step_end(self, seq: int, d: dict[str, Any]) -> None:
        entry = self.step(d.get("assistantMessageID"), seq)
        entry.update(finish=d.get("finish"), tokens=d.get("tokens"), cost=d.get("cost"), complete=True,
                     end_seq=seq)

    def _step_fail(self, seq: int, d: dict[str, Any]) -> None:
        entry = self.step(d.get("assistantMessageID"), seq)
        error = d.get("error")
        entry.update(finish="error", error=error, complete=True, end_seq=seq)
        entry["interrupted"] = entry["interrupted"] or _interrupted(error)

    def _part(self, kind: str, seq: int, d: dict[str, Any], id_key: str) -> Entry:
        key = (kind, str(d.get(id_key)))
        part = self.texts.get(key)
        if part is None:
            part = {"type": kind, "id": d.get(id_key), "text": None, "complete": False}
            self.texts[key] = part
            self.step(d.get("assistantMessageID"), seq)["parts"].append(part)
        return part

    def _text_start(self, seq: int, d: dict[str, Any]) -> None:
        self._part("text", seq, d, "textID")

    def _text_end(self, seq: int, d: dict[str, Any]) -> None:
        self._part("text", seq, d, "textID").update(text=d.get("text"), complete=True)

    def _reasoning_start(self, seq: int, d: dict[str, Any]) -> None:
        self._part("reasoning", seq, d, "reasoningID")

    def _reasoning_end(self, seq: int, d: dict[str, Any]) -> None:
        self._part("reasoning", seq, d, "reasoningID").update(text=d.get("text"), complete=True)

    def _tool(self, seq: int, d: dict[str, Any]) -> Entry:
        call_id = str(d.get("callID"))
        tool = self.tools.get(call_id)
        if tool is None:
            tool = {"type": "tool", "call_id": d.get("callID"), "tool": d.get("name") or d.get("tool"),
                    "input": None, "input_text": None, "status": "pending", "output": None,
                    "output_text": None, "structured": None, "error": None, "interrupted": False}
            self.tools[call_id] = tool
            self.step(d.get("assistantMessageID"), seq)["parts"].append(tool)
        return tool

    def _tool_input_start(self, seq: int, d: dict[str, Any]) -> None:
        self._tool(seq, d)

    def _tool_input_end(self, seq: int, d: dict[str, Any]) -> None:
        self._tool(seq, d)["input_text"] = d.get("text")

    def _tool_start(self, seq: int, d: dict[str, Any]) -> None:
        tool = self._tool(seq, d)
        tool.update(tool=d.get("tool") or tool["tool"], input=d.get("input"), status="running")

    def _tool_success(self, seq: int, d: dict[str, Any]) -> None:
        content, structured = d.get("content"), d.get("structured")
        self._tool(seq, d).update(status="success", output=content, output_text=_output_text(content, structured),
                                  structured=structured)

    def _tool_fail(self, seq: int, d: dict[str, Any]) -> None:
        error = d.get("error")
        self._tool(seq, d).update(status="failed", error=error, interrupted=_interrupted(error),
                                  output=d.get("result"))
        if _interrupted(error):
            self.step(d.get("assistantMessageID"), seq)["interrupted"] = True

    def _agent_switch(self, seq: int, d: dict[str, Any]) -> None:
        self.entries.append({"type": "agent_switch", "seq": seq, "agent": d.get("agent")})

    def _model_switch(self, seq: int, d: dict[str, Any]) -> None:
        self.entries.append({"type": "model_switch", "seq": seq, "model": d.get("model")})


class TranscriptBuilder:
    """The same transcript built one row at a time, rows in seq order (the HTTP API streams a session's
    rows through it instead of loading them all)."""

    def __init__(self) -> None:
        self._b = _Builder()

    def add(self, row: Mapping[str, Any]) -> None:
        d = _data(row)
        self._b.add(int(row["seq"]), str(row["kind"]), d)
        if row.get("asked_by") is not None:  # a prompt sent through the bridge: its token's subject
            entry = self._b.prompts.get(str(d.get("messageID")))
            if entry is not None:
                entry["asked_by"] = row["asked_by"]

    @property
    def entries(self) -> list[Entry]:
        return self._b.entries


def build_transcript(rows: Iterable[Mapping[str, Any]]) -> list[Entry]:
    """`rows`: stored events with at least `seq`, `kind` and `payload` (the envelope), any order."""
    b = TranscriptBuilder()
    for row in sorted(rows, key=lambda r: int(r["seq"])):
        b.add(row)
    return b.entries
