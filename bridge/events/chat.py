"""`ChatEvent`: one normalized event, with the columns the store and the WebSocket need. Pure.

This package is the only reader of upstream field names: the properties below give the rest of the
bridge what the normalized columns do not carry (verbatim upstream values the transcript shows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.events.envelope import Envelope
from bridge.events.error_envelope import is_interrupt
from bridge.events.fields import location_directory
from bridge.events.kinds import Kind


@dataclass(frozen=True)
class ChatEvent:
    """One normalized event. Optional fields are None when the type does not carry them."""

    envelope: Envelope
    kind: Kind
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
    # Added after the first contract: permission.v2.* (docs/upstream.md §4.4).
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

    @property
    def session_id(self) -> str | None:
        return self.envelope.session_id

    # -- upstream values kept as they are (the transcript shows them verbatim) -----------------------

    @property
    def data(self) -> dict[str, Any]:
        """The upstream `data` object, untouched."""
        return self.envelope.data

    @property
    def directory(self) -> str | None:
        """`location.directory` (live events), if it is a string PostgreSQL can store."""
        return location_directory(self.envelope.raw)

    @property
    def error(self) -> Any:
        """The error envelope of a failed step or tool, verbatim."""
        return self.data.get("error")

    @property
    def interrupted(self) -> bool:
        """A failed step or tool whose error is the upstream's interrupt (docs/upstream.md §4.2)."""
        return is_interrupt(self.error)

    @property
    def tokens(self) -> Any:
        """`step:end` token counts, verbatim (`input`, `output`, `reasoning`, `cache.read/write`)."""
        return self.data.get("tokens")

    @property
    def reported_cost(self) -> Any:
        """`step:end` cost as the upstream wrote it (`cost` is the same as a float, or None)."""
        return self.data.get("cost")

    @property
    def model(self) -> dict[str, Any] | None:
        """`{"provider", "id"}` of `step:start`, None when the event names no model object."""
        m = self.data.get("model")
        return {"provider": m.get("providerID"), "id": m.get("id")} if isinstance(m, dict) else None

    @property
    def switched_model(self) -> Any:
        """The `model` of `model:switch`, verbatim."""
        return self.data.get("model")

    @property
    def tool_input(self) -> Any:
        """The resolved input of `tool:start`."""
        return self.data.get("input")

    @property
    def tool_content(self) -> Any:
        """The result parts of `tool:success`."""
        return self.data.get("content")

    @property
    def tool_structured(self) -> Any:
        """The structured result of `tool:success`."""
        return self.data.get("structured")

    @property
    def tool_result(self) -> Any:
        """What a failed tool returned (`tool:fail`)."""
        return self.data.get("result")

    @property
    def tool_output_text(self) -> str | None:
        """The text parts of a tool's result; tools that return no text parts (e.g. `read`) carry their
        output in `structured.content`."""
        content, structured = self.tool_content, self.tool_structured
        texts = [c.get("text") for c in content if isinstance(c, dict) and c.get("type") == "text"] \
            if isinstance(content, list) else []
        joined = "".join(t for t in texts if isinstance(t, str))
        if not joined and isinstance(structured, dict) and isinstance(structured.get("content"), str):
            return str(structured["content"])
        return joined if isinstance(content, list) else None

    def data_without_text(self, text: object) -> dict[str, Any]:
        """`data`, except a text another field already carries: `data.text` (text, reasoning and tool-input
        ends) and `data.prompt.text` (prompts) are left out rather than sent twice."""
        if text is None:
            return self.data
        out = {k: v for k, v in self.data.items() if not (k == "text" and v == text)}
        prompt = out.get("prompt")
        if isinstance(prompt, dict) and prompt.get("text") == text:
            out["prompt"] = {k: v for k, v in prompt.items() if k != "text"}
        return out

    @property
    def tool_span_ms(self) -> tuple[int | None, int | None] | None:
        """When the tool ran, if the event says so itself (legacy parts do; v2 events time each event)."""
        return None

    @property
    def runtime(self) -> str:
        """Which upstream runtime wrote the event: `v2` or `legacy` (docs/legacy.md)."""
        return "v2"
