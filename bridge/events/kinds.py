"""The normalized kinds of upstream events: one `Kind` per upstream type (docs/upstream.md §9).

`Kind` is a `StrEnum`: a kind compares equal to its string (`Kind.TEXT_END == "text:end"`), which is also
what is stored in `chat_session_events.kind` and sent on the WebSocket.
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    PROMPT_ADMITTED = "prompt:admitted"
    PROMPT_STARTED = "prompt:started"
    STEP_START = "step:start"
    STEP_END = "step:end"
    STEP_FAIL = "step:fail"
    TEXT_START = "text:start"
    TEXT_END = "text:end"
    REASONING_START = "reasoning:start"
    REASONING_END = "reasoning:end"
    TOOL_INPUT_START = "tool:input-start"
    TOOL_INPUT_END = "tool:input-end"
    TOOL_START = "tool:start"
    TOOL_SUCCESS = "tool:success"
    TOOL_FAIL = "tool:fail"
    AGENT_SWITCH = "agent:switch"
    MODEL_SWITCH = "model:switch"
    DELTA_TEXT = "delta:text"
    DELTA_REASONING = "delta:reasoning"
    DELTA_TOOL_INPUT = "delta:tool-input"
    PERMISSION_ASKED = "permission:asked"
    PERMISSION_REPLIED = "permission:replied"
    QUESTION_ASKED = "question:asked"
    QUESTION_REPLIED = "question:replied"
    QUESTION_REJECTED = "question:rejected"
    SESSION_CREATED = "session:created"
    SESSION_DELETED = "session:deleted"
    SESSION_UPDATED = "session:updated"
    SERVER_CONNECTED = "server:connected"
    LEGACY_MESSAGE_UPDATED = "legacy:message-updated"
    LEGACY_PART_UPDATED = "legacy:part-updated"
    LEGACY_PART_DELTA = "legacy:part-delta"
    LEGACY_SESSION_STATUS = "legacy:session-status"
    LEGACY_SESSION_IDLE = "legacy:session-idle"
    LEGACY_SESSION_ERROR = "legacy:session-error"
    LEGACY_SESSION_DIFF = "legacy:session-diff"
    SERVER_HEARTBEAT = "server:heartbeat"
    # The whole session as OpenCode shows it (docs/upstream.md §20, §22): content, removal, undo, live state.
    PROMPT_SYNTHETIC = "prompt:synthetic"
    FILE_ATTACHED = "file:attached"
    PATCH = "patch"
    COMPACTION = "compaction"
    COMPACTION_START = "compaction:start"
    COMPACTION_END = "compaction:end"
    DELTA_COMPACTION = "delta:compaction"
    SUBTASK = "subtask"
    RETRY = "retry"
    SHELL_START = "shell:start"
    SHELL_END = "shell:end"
    REVERT_STAGED = "revert:staged"
    REVERT_CLEARED = "revert:cleared"
    REVERT_COMMITTED = "revert:committed"
    CONTEXT_UPDATED = "context:updated"
    SESSION_MOVED = "session:moved"
    SESSION_COMPACTED = "session:compacted"
    MESSAGE_REMOVED = "message:removed"
    PART_REMOVED = "part:removed"
    TODO_UPDATED = "todo:updated"
    FILE_EDITED = "file:edited"
    COMMAND_EXECUTED = "command:executed"
    NOISE = "noise"
    UNKNOWN = "unknown"


UNKNOWN = Kind.UNKNOWN
NOISE = Kind.NOISE

# The one type → kind table (docs/upstream.md §9). A type missing here is `unknown`.
TYPE_KINDS: dict[str, Kind] = {
    "session.next.prompt.admitted": Kind.PROMPT_ADMITTED,
    "session.next.prompted": Kind.PROMPT_STARTED,
    "session.next.step.started": Kind.STEP_START,
    "session.next.step.ended": Kind.STEP_END,
    "session.next.step.failed": Kind.STEP_FAIL,
    "session.next.text.started": Kind.TEXT_START,
    "session.next.text.ended": Kind.TEXT_END,
    "session.next.reasoning.started": Kind.REASONING_START,
    "session.next.reasoning.ended": Kind.REASONING_END,
    "session.next.tool.input.started": Kind.TOOL_INPUT_START,
    "session.next.tool.input.ended": Kind.TOOL_INPUT_END,
    "session.next.tool.called": Kind.TOOL_START,
    "session.next.tool.success": Kind.TOOL_SUCCESS,
    "session.next.tool.failed": Kind.TOOL_FAIL,
    "session.next.agent.switched": Kind.AGENT_SWITCH,
    "session.next.model.switched": Kind.MODEL_SWITCH,
    "session.next.text.delta": Kind.DELTA_TEXT,
    "session.next.reasoning.delta": Kind.DELTA_REASONING,
    "session.next.tool.input.delta": Kind.DELTA_TOOL_INPUT,
    "permission.v2.asked": Kind.PERMISSION_ASKED,
    "permission.v2.replied": Kind.PERMISSION_REPLIED,
    # Questions of the built-in `question` tool, both runtimes alike (docs/upstream.md §18): live only.
    "question.asked": Kind.QUESTION_ASKED,
    "question.replied": Kind.QUESTION_REPLIED,
    "question.rejected": Kind.QUESTION_REJECTED,
    "question.v2.asked": Kind.QUESTION_ASKED,
    "question.v2.replied": Kind.QUESTION_REPLIED,
    "question.v2.rejected": Kind.QUESTION_REJECTED,
    "session.created": Kind.SESSION_CREATED,
    "session.deleted": Kind.SESSION_DELETED,
    "session.updated": Kind.SESSION_UPDATED,
    "server.connected": Kind.SERVER_CONNECTED,
    # Written by legacy-endpoint turns; they reach /api/event with durable seqs of the session but are
    # never on the durable stream, which is why that stream has seq gaps (docs/upstream.md §3.1, §5).
    "message.updated": Kind.LEGACY_MESSAGE_UPDATED,
    "message.part.updated": Kind.LEGACY_PART_UPDATED,
    # Only ever seen on the legacy /event stream and on /global/event (docs/upstream.md §9, §15, §16).
    "message.part.delta": Kind.LEGACY_PART_DELTA,
    "session.status": Kind.LEGACY_SESSION_STATUS,
    "session.idle": Kind.LEGACY_SESSION_IDLE,
    "session.error": Kind.LEGACY_SESSION_ERROR,
    "session.diff": Kind.LEGACY_SESSION_DIFF,
    "server.heartbeat": Kind.SERVER_HEARTBEAT,
    # Declared v2 types not produced by 1.18.33's own turns (docs/upstream.md §20, §22): kinds all the same.
    "session.next.synthetic": Kind.PROMPT_SYNTHETIC,
    "session.next.retried": Kind.RETRY,
    "session.next.shell.started": Kind.SHELL_START,
    "session.next.shell.ended": Kind.SHELL_END,
    "session.next.compaction.started": Kind.COMPACTION_START,
    "session.next.compaction.delta": Kind.DELTA_COMPACTION,
    "session.next.compaction.ended": Kind.COMPACTION_END,
    "session.next.revert.staged": Kind.REVERT_STAGED,
    "session.next.revert.cleared": Kind.REVERT_CLEARED,
    "session.next.revert.committed": Kind.REVERT_COMMITTED,
    "session.next.context.updated": Kind.CONTEXT_UPDATED,
    "session.next.moved": Kind.SESSION_MOVED,
    # Legacy bus: removal is persisted (sync log `message.removed.1`); the rest is live only (§20, §22).
    "message.removed": Kind.MESSAGE_REMOVED,
    "message.part.removed": Kind.PART_REMOVED,
    "session.compacted": Kind.SESSION_COMPACTED,
    "todo.updated": Kind.TODO_UPDATED,
    "file.edited": Kind.FILE_EDITED,
    "command.executed": Kind.COMMAND_EXECUTED,
    # Process noise on /api/event (docs/upstream.md §5): kept visible, never acted upon.
    "plugin.added": Kind.NOISE,
    "catalog.updated": Kind.NOISE,
    "reference.updated": Kind.NOISE,
    "integration.updated": Kind.NOISE,
    "file.watcher.updated": Kind.NOISE,
}

# Kinds that come from a legacy part's type rather than an event type (`bridge.events.legacy`, docs/upstream.md §20).
PART_KINDS: dict[str, Kind] = {
    "file": Kind.FILE_ATTACHED,
    "patch": Kind.PATCH,
    "compaction": Kind.COMPACTION,
    "subtask": Kind.SUBTASK,
    "retry": Kind.RETRY,
}

KINDS: frozenset[str] = frozenset(TYPE_KINDS.values()) | frozenset(PART_KINDS.values()) | {UNKNOWN}

_NOISE_TYPES = frozenset(t for t, k in TYPE_KINDS.items() if k == NOISE)
DELTA_KINDS = frozenset({Kind.DELTA_TEXT, Kind.DELTA_REASONING, Kind.DELTA_TOOL_INPUT, Kind.DELTA_COMPACTION})
PERMISSION_KINDS = frozenset({Kind.PERMISSION_ASKED, Kind.PERMISSION_REPLIED})
QUESTION_KINDS = frozenset({Kind.QUESTION_ASKED, Kind.QUESTION_REPLIED, Kind.QUESTION_REJECTED})


def kind_of(event_type: str) -> Kind:
    return TYPE_KINDS.get(event_type, UNKNOWN)


def is_noise(event_type: str) -> bool:
    return event_type in _NOISE_TYPES


def is_delta(kind: str) -> bool:
    """Deltas are live-only and ephemeral: never stored, never carry a seq (docs/upstream.md §3.5)."""
    return kind.startswith("delta:")
