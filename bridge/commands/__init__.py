"""Commands through the bridge (docs/commands.md): the pure core is re-exported here; the I/O lives in
`bridge.command_service`, the routes in `bridge.http.commands`."""

from bridge.auth import SCOPES
from bridge.commands.model import (
    REQUIRED_SCOPE,
    Command,
    CommandError,
    parse_command,
    scope_allows,
    upstream_message_id,
    upstream_session_id,
)
from bridge.commands.ratelimit import RateLimiter

__all__ = [
    "REQUIRED_SCOPE",
    "SCOPES",
    "Command",
    "CommandError",
    "RateLimiter",
    "parse_command",
    "scope_allows",
    "upstream_message_id",
    "upstream_session_id",
]
