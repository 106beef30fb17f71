"""Every exception the bridge raises on purpose, in one hierarchy.

```
BridgeError
├── ConfigError            a setting is missing or malformed (ValueError)
│   └── SecretFileError       the generated auth secret file is unusable
├── AuthError              a token was refused; `code` says why
├── UpstreamError          talking to `opencode serve` failed; `status` None for transport failures
│   ├── UpstreamUnavailable   refused/reset connection, cut body, 5xx: retry with backoff
│   ├── SessionNotFound       404 on a session route
│   │   └── InvalidSessionId  an id that cannot exist upstream: never sent
│   ├── InvalidRequest        400: our request is wrong, retrying will not help
│   ├── Unauthorized          401: wrong or missing upstream credentials
│   └── BodyTooLarge          a response body over the client's bound
├── BadInput               input the bridge does not control is unusable (ValueError)
│   ├── BadFrame              not a usable v2 envelope; `reason` is a metric label
│   │   └── FrameTooLarge     one SSE frame outgrew the parser's bound (bridge.upstream.sse, with its items)
│   ├── ProtocolError         a WebSocket client message is wrong
│   ├── BadRequest            an audit API request is wrong
│   └── ExportError           an export file is malformed
├── CursorBehind           the database holds less of a session than was written to it (lost commits)
└── LeaseError             the session is not ours to write
    ├── LeaseLost             a write was fenced off (epoch moved on): nothing was written
    └── LeaseHeld             a claim was refused: another live process holds it (or it is deleted)
```

The store raises `LeaseLost` and the follower lets it through: there is one lease-lost error, not one
per layer. This module imports nothing from the bridge at run time, so any module may import it; the one
error that carries another module's values, `FrameTooLarge`, lives with its parser (bridge.upstream.sse).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.lease import ClaimVerdict


class BridgeError(Exception):
    """Base of every exception the bridge raises on purpose."""


class ConfigError(BridgeError, ValueError):
    """A setting is missing or malformed; the message names the variable."""


class SecretFileError(ConfigError):
    """The generated secret file is unusable (empty, short, readable by others): a start-up error."""


class AuthError(BridgeError):
    """Why a token was refused; `code` is a stable machine-readable reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code  # missing | invalid | expired | wrong_upstream | forbidden


# --- the upstream ------------------------------------------------------------------------------------


class UpstreamError(BridgeError):
    """Any failure talking to the upstream. `status` is None for transport failures."""

    def __init__(self, message: str, status: int | None = None, tag: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.tag = tag


class UpstreamUnavailable(UpstreamError):
    """Connection refused/reset, truncated body, or a 5xx: retry with backoff."""


class SessionNotFound(UpstreamError):
    """404 on a session route: deleted upstream, or never existed."""


class InvalidSessionId(SessionNotFound):
    """The id does not have the upstream's id shape, so no such session can exist; nothing was sent."""


class InvalidRequest(UpstreamError):
    """400: our request is wrong (e.g. a cursor the upstream rejects). Retrying will not help."""


class Unauthorized(UpstreamError):
    """401: BRIDGE_UPSTREAM_USERNAME / BRIDGE_UPSTREAM_PASSWORD are wrong or missing."""


class BodyTooLarge(UpstreamError):
    """A response body exceeded the client's bound; it was not read further."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


# --- bad input -----------------------------------------------------------------------------------------


class BadInput(BridgeError, ValueError):
    """Input from outside (upstream frames, clients, files) that cannot be used as it is."""


class BadFrame(BadInput):
    """A frame that is not a usable v2 envelope; `reason` is a short machine-readable code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class ProtocolError(BadInput):
    """A WebSocket client message the protocol refuses; `code` is sent back in the `error` message."""

    def __init__(self, code: str, message: str, ref: object = None, reason: str = "bad_message") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.ref = ref
        self.reason = reason  # metric label (bridge_ws_bad_messages_total)


class BadRequest(BadInput):
    """An audit API request with a malformed parameter (HTTP 400)."""


class ExportError(BadInput):
    """An export file that is not what `export` writes."""


# --- leases ------------------------------------------------------------------------------------------


class LeaseError(BridgeError):
    """The session is not this process's to write right now."""


class LeaseLost(LeaseError):
    """The write was fenced off: the session's lease epoch is no longer ours. Nothing was written."""


class CursorBehind(BridgeError):
    """The database holds less of the session than its follower wrote: its newest commits were lost (a
    failover to a standby that had not received them, a restore). Nothing of the write was stored; the
    follower re-reads from `stored` (docs/scaling.md, "Failover")."""

    def __init__(self, session_id: str, believed: int, stored: int) -> None:
        super().__init__(f"session {session_id!r}: cursor {believed} written, the database has {stored}")
        self.stored = stored


class LeaseHeld(LeaseError):
    """Another live incarnation holds the session (or it is deleted): not ours to follow now."""

    def __init__(self, session_id: str, verdict: ClaimVerdict, holder: str | None) -> None:
        super().__init__(f"session {session_id!r}: {verdict.value} (holder {holder!r})")
        self.verdict = verdict
        self.holder = holder


# --- the one error envelope (docs/errors.md) -----------------------------------------------------------

# Every code the bridge sends, HTTP and WebSocket alike; docs/errors.md has one row for each, and the
# OpenAPI and AsyncAPI documents list them (tests/unit/test_error_envelope.py keeps the four equal).
# A client must still accept a code it does not know (this list grows) and show the `message`.
KNOWN_ERROR_CODES = frozenset({
    "bad_request", "bad_message", "unauthorized", "token_expired", "token_revoked", "forbidden",
    "bad_origin", "bad_host", "not_found", "unknown_session", "not_subscribed", "method_not_allowed",
    "conflict", "too_large", "unsupported_media_type", "model_unavailable", "bad_file", "rate_limited",
    "too_many_subscriptions", "too_many_connections", "slow_consumer", "busy", "unavailable",
    "upstream_unavailable", "internal",
})


def error_envelope(code: str, message: str, correlation_id: str | None = None,
                   retry_after: float | None = None) -> dict[str, object]:
    """The error object every `/v1` answer and every WebSocket `error` / `command_result` frame carries under
    `error`: a stable `code`, a human `message`, the `correlation_id` of the log line (filled in by the HTTP
    layer when the producer has none) and `retry_after` (seconds) where waiting helps. Clients must accept
    codes they do not know and fall back on `message`."""
    err: dict[str, object] = {"code": code, "message": message}
    if correlation_id is not None:
        err["correlation_id"] = correlation_id
    if retry_after is not None:
        err["retry_after"] = retry_after
    return err


def error_body(code: str, message: str, correlation_id: str | None = None,
               retry_after: float | None = None) -> dict[str, object]:
    """`{"error": error_envelope(...)}`: the body of every `/v1` HTTP error answer."""
    return {"error": error_envelope(code, message, correlation_id, retry_after)}


def as_error_body(body: object) -> dict[str, object]:
    """An error body in the envelope's shape, whatever shape it was stored in: command rows written before
    the envelope hold `{"error": "<code>", "message": …, "correlation_id"?: …}`; a body already in shape is
    returned as is, anything else becomes an `internal` error (never raises: it runs on answers)."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            return body
        if isinstance(err, str):
            msg, ref = body.get("message"), body.get("correlation_id")
            return error_body(err, msg if isinstance(msg, str) else err, ref if isinstance(ref, str) else None)
    return error_body("internal", "the bridge produced an error without a code")
