"""Typed read-only views of legacy payloads (pure; docs/legacy.md, docs/upstream.md §15, §16).

`bridge.events.legacy` decides kinds; these read what a consumer needs from the payload of one legacy event
and that has no normalized column: a tool call's input/output/error (transcripts, the tool-call
audit), a `session.status` (busy / idle / retry with attempt and next time, for a visible `retrying`
status), a session title. Wrong-shaped fields yield None; nothing here raises on data.

`LegacyChatEvent` is the `ChatEvent` of a legacy event: its properties give the same values, in the same
shapes, as a v2 event's (tool input, output text, error `{type, message}`, tokens, model), so the
transcript, the WebSocket and every other consumer read both runtimes through one interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.events.chat import ChatEvent
from bridge.events.envelope import Envelope
from bridge.events.fields import as_int as _int
from bridge.events.fields import as_obj as _obj
from bridge.events.fields import as_str as _str
from bridge.events.kinds import Kind


def legacy_part(env: Envelope) -> dict[str, Any]:
    """The whole part of a `message.part.updated` (empty for any other type)."""
    return _obj(env.data.get("part")) if env.type == "message.part.updated" else {}


@dataclass(frozen=True)
class ToolCall:
    call_id: str | None
    tool: str | None
    status: str | None  # pending | running | completed | error (any other string is kept)
    input: Any  # the parsed arguments (`{}` while pending)
    output: str | None  # completed: the tool's output text
    error: str | None  # error: the tool's error text
    title: str | None


def tool_call(env: Envelope) -> ToolCall | None:
    """The tool call in a legacy tool part as of this update, or None if the event is not one."""
    part = legacy_part(env)
    if part.get("type") != "tool":
        return None
    state = _obj(part.get("state"))
    return ToolCall(
        call_id=_str(part.get("callID")),
        tool=_str(part.get("tool")),
        status=_str(state.get("status")),
        input=state.get("input"),
        output=_str(state.get("output")),
        error=_str(state.get("error")),
        title=_str(state.get("title")),
    )


@dataclass(frozen=True)
class SessionStatus:
    type: str  # busy | idle | retry, or any other string upstream sends
    attempt: int | None = None  # retry only
    message: str | None = None  # retry only: display text, never interpreted
    next_ms: int | None = None  # retry only: epoch ms of the next attempt


def session_status(env: Envelope) -> SessionStatus | None:
    """The status of a `session.status` event (legacy bus shape), or None."""
    if env.type != "session.status":
        return None
    status = _obj(env.data.get("status"))
    status_type = _str(status.get("type"))
    if status_type is None:
        return None
    return SessionStatus(
        type=status_type,
        attempt=_int(status.get("attempt")),
        message=_str(status.get("message")),
        next_ms=_int(status.get("next")),
    )


def session_title(env: Envelope) -> str | None:
    """The title carried by `session.created` / `session.updated` (`data.info.title`)."""
    if env.type not in ("session.created", "session.updated"):
        return None
    return _str(_obj(env.data.get("info")).get("title"))


# An aborted legacy turn fails with this error name (docs/upstream.md §16): the v2 interrupt's twin.
ABORTED_ERROR = "MessageAbortedError"


@dataclass(frozen=True)
class LegacyChatEvent(ChatEvent):
    """A legacy event: the `ChatEvent` properties read the legacy payload (docs/legacy.md)."""

    @property
    def runtime(self) -> str:
        return "legacy"

    @property
    def error(self) -> Any:
        """`{type, message}` as a v2 error (a legacy `{name, data.message}` error has been read into the
        columns; a tool's bare-string error has no type)."""
        if self.error_type is None and self.error_message is None:
            return None
        return {"type": self.error_type, "message": self.error_message}

    @property
    def interrupted(self) -> bool:
        return self.error_type == ABORTED_ERROR

    @property
    def tokens(self) -> Any:
        if self.kind != Kind.STEP_END:
            return None
        return {"input": self.tokens_input, "output": self.tokens_output, "reasoning": self.tokens_reasoning,
                "cache": {"read": self.tokens_cache_read, "write": self.tokens_cache_write}}

    @property
    def reported_cost(self) -> Any:
        return legacy_part(self.envelope).get("cost") if self.kind == Kind.STEP_END else None

    @property
    def model(self) -> dict[str, Any] | None:
        if self.type != "message.updated" or self.assistant_message_id is None:
            return None
        return {"provider": self.provider_id, "id": self.model_id}

    @property
    def switched_model(self) -> Any:
        return None

    def data_without_text(self, text: object) -> dict[str, Any]:
        """`data`, except the part's text when another field already carries it (prompts, text ends)."""
        part = self.data.get("part")
        if text is None or not isinstance(part, dict) or part.get("text") != text:
            return self.data
        return {**self.data, "part": {k: v for k, v in part.items() if k != "text"}}

    def _call(self) -> ToolCall | None:
        return tool_call(self.envelope)

    @property
    def tool_input(self) -> Any:
        call = self._call()
        return call.input if call is not None and call.status != "pending" else None

    @property
    def tool_content(self) -> Any:
        return None  # a legacy tool returns one output string: `tool_output_text`

    @property
    def tool_structured(self) -> Any:
        state = _obj(legacy_part(self.envelope).get("state"))
        metadata = state.get("metadata")
        return metadata if isinstance(metadata, dict) and state.get("status") == "completed" else None

    @property
    def tool_result(self) -> Any:
        return None

    @property
    def tool_output_text(self) -> str | None:
        call = self._call()
        return call.output if call is not None and call.status == "completed" else None

    @property
    def tool_span_ms(self) -> tuple[int | None, int | None] | None:
        time = _obj(_obj(legacy_part(self.envelope).get("state")).get("time"))
        if self._call() is None or not time:
            return None
        return _int(time.get("start")), _int(time.get("end"))
