"""The open error envelope `{type, message}` of `step.failed` / `tool.failed` (docs/upstream.md §4.3).

Any `type` string is valid and kept; `message` is the display text; a missing or non-string message gets
a bounded generic fallback; extra fields stay in the raw envelope. No decision is taken on `message`
text, except recognising the exact messages the upstream uses for an interrupt (§4.2), which have no
event of their own.
"""

from __future__ import annotations

from typing import Any

ERROR_FALLBACK_MAX = 200

# The exact messages opencode 1.18.33 uses for an interrupt (docs/upstream.md §4.2).
INTERRUPT_MESSAGES = frozenset({"Provider turn interrupted", "Tool execution interrupted"})


def error_fallback(error_type: str | None) -> str:
    """Display text for an error without a usable message; bounded, since `type` is upstream data."""
    if error_type is None:
        return "Error"
    room = ERROR_FALLBACK_MAX - len("Error ()")
    shown = error_type if len(error_type) <= room else error_type[: room - 1] + "…"
    return f"Error ({shown})"


def error_fields(error: object) -> dict[str, Any]:
    """`error_type` and `error_message` of an error envelope (the `error` of a failed step or tool)."""
    obj = error if isinstance(error, dict) else {}
    error_type = obj.get("type")
    error_type = error_type if isinstance(error_type, str) else None  # any string, "unknown" included
    message = obj.get("message")
    if not isinstance(message, str):
        message = error_fallback(error_type)
    return {"error_type": error_type, "error_message": message}


def is_interrupt(error: object) -> bool:
    """True for the error envelope the upstream writes when a turn or a tool was interrupted."""
    return isinstance(error, dict) and error.get("message") in INTERRUPT_MESSAGES
