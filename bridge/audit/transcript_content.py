"""The session's content in its transcript: attachments, synthetic text, patches, subtasks, removal, undo.

Pure; used by `bridge.audit.transcript` (docs/audit.md "Content, removal and undo", docs/upstream.md §20,
§22):

- a synthetic text part (`prompt:synthetic`, e.g. a text file opencode inlined) and a `file:attached` part
  belong to the prompt of their user message (`synthetic`, `attachments`), never a prompt of their own;
- `patch`, `subtask`, `compaction`, `retry` parts go to the step (assistant message) or the prompt (user
  message) they belong to, as parts `{type, id, seq, …fields}`;
- `message:removed` / `part:removed` never delete anything: the entry or part gets `removed: true` and
  `removed_seq` (the events stay in `chat_session_events`; a viewer hides them by default);
- the session's last `info.revert` marks the entry it names `reverted: "from_here"` and every later entry
  `reverted: true` ("reverted from here"); a cleared revert (unrevert) removes the marks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bridge.events import ChatEvent, Kind
from bridge.events.content import content_fields, file_fields, revert_fields

Entry = dict[str, Any]


class Builder(Protocol):
    entries: list[Entry]
    prompts: dict[str, Entry]
    steps: dict[str, Entry]
    tools: dict[str, Entry]
    content: ContentMarks

    def step(self, message_id: str | None, seq: int) -> Entry: ...


@dataclass
class ContentMarks:
    """What removal and undo events said, applied to the entries when the transcript is read."""

    removed_messages: dict[str, int] = field(default_factory=dict)  # message id → seq of the removal
    removed_parts: dict[str, int] = field(default_factory=dict)  # part id → seq of the removal
    revert: dict[str, Any] | None = None  # the session's current `info.revert`
    revert_seq: int | None = None
    parts: dict[str, Entry] = field(default_factory=dict)  # part id → transcript part (for part removal)


def prompt_entry(b: Builder, message_id: str | None, seq: int) -> Entry:
    """The user entry of `message_id`; a placeholder (`text: None`) when its text part is not seen yet."""
    key = str(message_id)
    entry = b.prompts.get(key)
    if entry is None:
        entry = {"type": "user", "message_id": message_id, "seq": seq, "text": None, "delivery": None,
                 "started_seq": None, "time_ms": None}
        b.prompts[key] = entry
        b.entries.append(entry)
    return entry


def _owner_id(ev: ChatEvent) -> str | None:
    return ev.message_id if ev.message_id is not None else ev.assistant_message_id


def _synthetic(b: Builder, seq: int, ev: ChatEvent) -> None:
    prompt = prompt_entry(b, _owner_id(ev), seq)
    part = {"id": ev.part_id, "seq": seq, "text": ev.text}
    prompt.setdefault("synthetic", []).append(part)
    if ev.part_id is not None:
        b.content.parts[ev.part_id] = part


def _attachment(b: Builder, seq: int, ev: ChatEvent) -> None:
    owner = _owner_id(ev)
    if str(owner) in b.steps:  # a file a tool or the model produced
        _content_part(b, seq, ev)
        return
    part = {"id": ev.part_id, "seq": seq, **file_fields(_legacy_part(ev))}
    prompt_entry(b, owner, seq).setdefault("attachments", []).append(part)
    if ev.part_id is not None:
        b.content.parts[ev.part_id] = part


def _legacy_part(ev: ChatEvent) -> dict[str, Any]:
    part = ev.data.get("part")
    return part if isinstance(part, dict) else ev.data


def _content_part(b: Builder, seq: int, ev: ChatEvent) -> None:
    owner = _owner_id(ev)
    part: Entry = {"type": str(ev.kind), "id": ev.part_id, "seq": seq, **content_fields(ev)}
    if str(owner) in b.prompts and str(owner) not in b.steps:
        b.prompts[str(owner)].setdefault("parts", []).append(part)
    else:
        b.step(owner, seq)["parts"].append(part)
    if ev.part_id is not None:
        b.content.parts[ev.part_id] = part


def _entry_of_seq(b: Builder, seq: int, ev: ChatEvent) -> None:
    """Session-level events with a place of their own (shell runs, compactions, retries of v2)."""
    b.entries.append({"type": str(ev.kind), "seq": seq, **content_fields(ev)})


def _message_removed(b: Builder, seq: int, ev: ChatEvent) -> None:
    if ev.message_id is not None:
        b.content.removed_messages.setdefault(ev.message_id, seq)


def _part_removed(b: Builder, seq: int, ev: ChatEvent) -> None:
    if ev.part_id is not None:
        b.content.removed_parts.setdefault(ev.part_id, seq)


def _session_updated(b: Builder, seq: int, ev: ChatEvent) -> None:
    info = ev.data.get("info")
    if isinstance(info, dict):  # the whole info each time: no `revert` means none (§22)
        revert = revert_fields(info)
        if revert != b.content.revert:
            b.content.revert, b.content.revert_seq = revert, seq if revert is not None else None


def _tool_child(b: Builder, seq: int, ev: ChatEvent) -> None:
    """A `task` tool call names its child session (docs/upstream.md §20): `child_session_id` on the card."""
    child = content_fields(ev).get("child_session_id")
    tool = b.tools.get(str(ev.call_id))
    if child is not None and tool is not None:
        tool["child_session_id"] = child


CONTENT_HANDLERS: dict[str, Callable[[Any, int, ChatEvent], None]] = {
    Kind.PROMPT_SYNTHETIC: _synthetic,
    Kind.FILE_ATTACHED: _attachment,
    Kind.PATCH: _content_part,
    Kind.SUBTASK: _content_part,
    Kind.COMPACTION: _content_part,
    Kind.RETRY: _content_part,
    Kind.SHELL_START: _entry_of_seq,
    Kind.SHELL_END: _entry_of_seq,
    Kind.COMPACTION_END: _entry_of_seq,
    Kind.MESSAGE_REMOVED: _message_removed,
    Kind.PART_REMOVED: _part_removed,
    Kind.SESSION_UPDATED: _session_updated,
    Kind.LEGACY_PART_UPDATED: _tool_child,
}
# Kinds whose own handler also runs the content handler after it (a task card's child shows up when done).
AFTER_HANDLERS: dict[str, Callable[[Any, int, ChatEvent], None]] = {
    Kind.TOOL_START: _tool_child, Kind.TOOL_SUCCESS: _tool_child, Kind.TOOL_FAIL: _tool_child,
}


def apply_marks(entries: list[Entry], marks: ContentMarks) -> None:
    """Mark removed and reverted entries and parts (idempotent; see the module docstring)."""
    for part_id, seq in marks.removed_parts.items():
        part = marks.parts.get(part_id)
        if part is not None:
            part.update(removed=True, removed_seq=seq)
    reverted_from = marks.revert.get("message_id") if marks.revert is not None else None
    after = False
    for entry in entries:
        entry.pop("reverted", None)
        message_id = entry.get("message_id")
        removed = marks.removed_messages.get(str(message_id)) if message_id is not None else None
        if removed is not None:
            entry.update(removed=True, removed_seq=removed)
        if reverted_from is not None and message_id == reverted_from and not after:
            after = True
            entry["reverted"] = "from_here"
        elif after:
            entry["reverted"] = True
