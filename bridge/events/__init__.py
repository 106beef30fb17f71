"""The mapping layer: upstream v2 envelopes (`session.next.*`, `permission.v2.*`, …) → normalized events.

Pure, no I/O, and the only place that reads upstream field names:

- `envelope`: `parse_frame()` / `parse_envelope()` validate the envelope (`Envelope`) or raise `BadFrame`;
- `kinds`: the `Kind` enum and the one type → kind table;
- `normalize`: `normalize()` an envelope to a `ChatEvent` (`chat`), `to_json()` its normalized view;
- `error_envelope`: the open error envelope `{type, message}`;
- `permission`: permission request state changes, from live events, re-syncs or stored records;
- `question`: the same for questions of the `question` tool, and the check of an answer;
- `pending`: the pending-request state machine over both kinds (what a session waits for).

The raw envelope always travels along untouched (`Envelope.raw`).
"""

from bridge.errors import BadFrame
from bridge.events.chat import ChatEvent
from bridge.events.envelope import SEQ_MAX, Envelope, parse_envelope, parse_frame
from bridge.events.error_envelope import ERROR_FALLBACK_MAX, INTERRUPT_MESSAGES, error_fallback, is_interrupt
from bridge.events.fields import location_directory
from bridge.events.kinds import (
    DELTA_KINDS,
    KINDS,
    NOISE,
    PERMISSION_KINDS,
    QUESTION_KINDS,
    TYPE_KINDS,
    UNKNOWN,
    Kind,
    is_delta,
    is_noise,
    kind_of,
)
from bridge.events.normalize import normalize, normalize_stored, to_json
from bridge.events.permission import (
    PermissionUpdate,
    pending_request,
    permission_of,
    permission_update,
    resolved_while_away,
    stored_permission,
)

__all__ = [
    "DELTA_KINDS",
    "ERROR_FALLBACK_MAX",
    "INTERRUPT_MESSAGES",
    "KINDS",
    "NOISE",
    "PERMISSION_KINDS",
    "QUESTION_KINDS",
    "SEQ_MAX",
    "TYPE_KINDS",
    "UNKNOWN",
    "BadFrame",
    "ChatEvent",
    "Envelope",
    "Kind",
    "PermissionUpdate",
    "error_fallback",
    "is_delta",
    "is_interrupt",
    "is_noise",
    "kind_of",
    "location_directory",
    "normalize",
    "normalize_stored",
    "parse_envelope",
    "parse_frame",
    "pending_request",
    "permission_of",
    "permission_update",
    "resolved_while_away",
    "stored_permission",
    "to_json",
]
