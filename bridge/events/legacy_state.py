"""What the legacy mapper remembers of one session (pure, plain data; docs/legacy.md): which milestones
each part or assistant message has emitted, rebuildable from the normalized columns of the stored rows
(`LegacyTurnState.from_rows`), so a restarted follower continues exactly where the previous process
stopped. The kinds a legacy turn maps to are the v2 turn's, named here once. `bridge.events.legacy`
is the mapper that uses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bridge.events.fields import as_str as _str
from bridge.events.kinds import PART_KINDS, Kind, kind_of

# The kinds' type (the `Kind` enum compares equal to its strings).
KindName = Kind

# The kinds, taken from the v2 types that give them: a legacy turn has exactly a v2 turn's kinds.
PROMPT = kind_of("session.next.prompt.admitted")
STEP_START = kind_of("session.next.step.started")
STEP_END = kind_of("session.next.step.ended")
STEP_FAIL = kind_of("session.next.step.failed")
TEXT_START = kind_of("session.next.text.started")
TEXT_END = kind_of("session.next.text.ended")
REASONING_START = kind_of("session.next.reasoning.started")
REASONING_END = kind_of("session.next.reasoning.ended")
TOOL_INPUT_START = kind_of("session.next.tool.input.started")
TOOL_START = kind_of("session.next.tool.called")
TOOL_SUCCESS = kind_of("session.next.tool.success")
TOOL_FAIL = kind_of("session.next.tool.failed")
DELTA_TEXT = kind_of("session.next.text.delta")
DELTA_REASONING = kind_of("session.next.reasoning.delta")
PERMISSION_ASKED = kind_of("permission.v2.asked")
PERMISSION_REPLIED = kind_of("permission.v2.replied")
MESSAGE_UPDATED = kind_of("message.updated")  # a re-send: nothing new reached
PART_UPDATED = kind_of("message.part.updated")  # a re-send: nothing new reached
PART_DELTA = kind_of("message.part.delta")  # a delta of a part whose type is not known
SESSION_UPDATED = kind_of("session.updated")
SESSION_ERROR = kind_of("session.error")
PROMPT_SYNTHETIC = kind_of("session.next.synthetic")  # a synthetic text part of a user message (§20)

# How far along its part (or, for steps, its assistant message) a milestone is. An update emits a
# milestone only if it is further along than everything already emitted for that id: a tool seen first
# as `completed` is `tool:success`, and a late `running` re-send after it is a plain update.
_STAGE: dict[str, int] = {
    PROMPT: 1, TEXT_START: 1, TEXT_END: 2, REASONING_START: 1, REASONING_END: 2,
    TOOL_INPUT_START: 1, TOOL_START: 2, TOOL_SUCCESS: 3, TOOL_FAIL: 3,
    STEP_END: 1,  # keyed by the step-finish part
    STEP_START: 1, STEP_FAIL: 2,  # keyed by the assistant message (one legacy assistant message = one step)
    PROMPT_SYNTHETIC: 1, **dict.fromkeys(PART_KINDS.values(), 1),  # content parts: once each (§20, §22)
}
_MESSAGE_MILESTONES = frozenset({STEP_START, STEP_FAIL})
# The stored rows `LegacyTurnState.seed` learns from; a follower may select only these.
SEED_KINDS: frozenset[str] = frozenset(_STAGE) | {MESSAGE_UPDATED}

# Legacy types handled here (docs/upstream.md §15, §16); everything else goes to `events.normalize`.
LEGACY_TYPES = frozenset({"message.updated", "message.part.updated", "message.part.delta", "session.updated",
                          "session.error", "permission.asked", "permission.replied"})
# Observed on /global/event, no session, never acted upon (docs/upstream.md §15).
EXTRA_NOISE = frozenset({"project.updated"})
# Part types seen in 1.18.33 that carry no milestone of their own; any other part type is `unknown`.
PLAIN_PART_TYPES = frozenset({"step-start", "snapshot", "agent"})


@dataclass
class LegacyTurnState:
    """Per-session memory of the legacy mapper; plain data, rebuildable from stored rows."""

    emitted: dict[tuple[str, str], str] = field(default_factory=dict)  # (part/message id, kind) → event id
    stage: dict[str, int] = field(default_factory=dict)  # part/message id → furthest stage emitted
    user_messages: set[str] = field(default_factory=set)  # a text part of these is the prompt
    part_types: dict[str, str] = field(default_factory=dict)  # part id → "text" | "reasoning" (deltas)

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]]) -> LegacyTurnState:
        state = cls()
        state.seed(rows)
        return state

    def seed(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Learn from stored rows of the session (`chat_session_events` columns `event_id`, `kind`,
        `part_id`, `message_id`, `assistant_message_id`), in any order; v2 rows are harmless."""
        for row in rows:
            kind, event_id = str(row.get("kind")), row.get("event_id")
            part_id, message_id = _str(row.get("part_id")), _str(row.get("message_id"))
            assistant_id = _str(row.get("assistant_message_id"))
            key = assistant_id if kind in _MESSAGE_MILESTONES else part_id
            if kind in _STAGE and key is not None and isinstance(event_id, str):
                self.emitted[(key, kind)] = event_id
                self.stage[key] = max(self.stage.get(key, 0), _STAGE[kind])
            if message_id is not None and assistant_id is None and kind in (PROMPT, MESSAGE_UPDATED):
                self.user_messages.add(message_id)
            if part_id is not None and kind in (TEXT_START, TEXT_END):
                self.part_types[part_id] = "text"
            if part_id is not None and kind in (REASONING_START, REASONING_END):
                self.part_types[part_id] = "reasoning"

    def reach(self, key: str, kind: str, event_id: str) -> bool:
        """Whether this event emits milestone `kind` of `key`: first time, or the same event again."""
        done = self.emitted.get((key, kind))
        if done is not None:
            return done == event_id
        if self.stage.get(key, 0) >= _STAGE[kind]:
            return False
        self.emitted[(key, kind)] = event_id
        self.stage[key] = _STAGE[kind]
        return True
