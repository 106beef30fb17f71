"""The `/v1/ws` wire protocol (docs/websocket.md), pure: client ops in (parsed here), server messages out
(shaped in bridge.fanout.frames, named here too for the modules that speak the whole protocol). No I/O.

Every frame is one JSON object in a text frame. Client frames carry `op`; server frames carry `type`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from bridge.errors import ProtocolError
from bridge.events import SEQ_MAX
from bridge.fanout.event_frames import StoredRow as StoredRow
from bridge.fanout.event_frames import dumps as dumps
from bridge.fanout.event_frames import event_frames as event_frames
from bridge.fanout.event_frames import event_message as event_message
from bridge.fanout.event_frames import replay_frames as replay_frames
from bridge.fanout.event_frames import truncated_event as truncated_event
from bridge.fanout.frames import MAX_CLIENT_MESSAGE_BYTES as MAX_CLIENT_MESSAGE_BYTES
from bridge.fanout.frames import MAX_SUBSCRIPTIONS as MAX_SUBSCRIPTIONS
from bridge.fanout.frames import caught_up_message as caught_up_message
from bridge.fanout.frames import command_result_message as command_result_message
from bridge.fanout.frames import delta_message as delta_message
from bridge.fanout.frames import erased_message as erased_message
from bridge.fanout.frames import error_message as error_message
from bridge.fanout.frames import hello_message as hello_message
from bridge.fanout.frames import permission_message as permission_message
from bridge.fanout.frames import pong_message as pong_message
from bridge.fanout.frames import sessions_message as sessions_message
from bridge.fanout.frames import status_message as status_message
from bridge.fanout.frames import subscribed_message as subscribed_message
from bridge.fanout.frames import unsubscribed_message as unsubscribed_message
from bridge.ids import SESSION_ID_RULE, valid_session_id

# --- close codes (documented in docs/websocket.md) -----------------------------------------------------
CLOSE_GOING_AWAY = 1001  # the bridge is shutting down: reconnect (to any replica) and resume
CLOSE_MESSAGE_TOO_BIG = 1009  # a client frame exceeded MAX_CLIENT_MESSAGE_BYTES
CLOSE_UNAUTHORIZED = 4401  # token missing, malformed, badly signed or for another upstream: do not retry as is
CLOSE_TOKEN_EXPIRED = 4402  # the token expired (at connect or later): reconnect with a fresh token and resume
CLOSE_TRY_AGAIN = 1013  # too many connections for this token, address or bridge: retry later
CLOSE_SLOW_CONSUMER = 4429  # the client fell too far behind: reconnect and resume from the last seq received

SESSIONS_PAGE_MAX = 500  # `sessions` op: most sessions in one reply
MAX_SEQ = SEQ_MAX  # PostgreSQL bigint: a larger `after` could never match and fails in the driver

# --- error codes of `error` messages ----------------------------------------------------------------
ERR_BAD_MESSAGE = "bad_message"  # not JSON, not an object, unknown op, wrong field type
ERR_FORBIDDEN = "forbidden"  # the token does not grant this session
ERR_TOO_MANY = "too_many_subscriptions"
ERR_NOT_SUBSCRIBED = "not_subscribed"
ERR_SLOW_CONSUMER = "slow_consumer"  # sent just before CLOSE_SLOW_CONSUMER, with `resume`
ERR_TOKEN_EXPIRED = "token_expired"  # sent just before CLOSE_TOKEN_EXPIRED
ERR_INTERNAL = "internal"
ERR_BUSY = "busy"  # the queue of reads is full (bridge.fanout.read_queue): retry after `retry_after` seconds
ERR_RATE_LIMITED = "rate_limited"  # the connection sends ops too fast: they are held back (docs/security.md)
ERR_TOKEN_REVOKED = "token_revoked"  # sent just before CLOSE_UNAUTHORIZED when the token is revoked
ERR_TOO_MANY_CONNECTIONS = "too_many_connections"  # sent just before CLOSE_TRY_AGAIN
ERR_UNKNOWN_SESSION = "unknown_session"  # neither the mirror nor the upstream knows this (well-formed) id


@dataclass(frozen=True)
class Subscribe:
    session: str
    after: int | None  # None: from the beginning
    ref: object = None


@dataclass(frozen=True)
class Unsubscribe:
    session: str
    ref: object = None


@dataclass(frozen=True)
class Ping:
    ref: object = None


@dataclass(frozen=True)
class ListSessions:
    ref: object = None
    limit: int = 100
    cursor: str | None = None  # the `next` of the previous page
    parent: str | None = None  # only the subagents' sessions of this one (docs/websocket.md)


@dataclass(frozen=True)
class CommandOp:
    """A command (docs/commands.md) over the socket: the HTTP body's fields sit in the frame itself."""

    command: str
    session: str | None
    request_id: str | None
    body: dict[str, Any]
    ref: object = None


ClientOp = Subscribe | Unsubscribe | Ping | ListSessions | CommandOp
_COMMAND_FRAME_KEYS = frozenset({"op", "id", "command", "session", "request_id"})


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ref(obj: dict[str, Any]) -> object:
    ref = obj.get("id")
    # Echoed back verbatim, so it must stay small, plain and encodable: no NaN/Infinity (not JSON), no
    # lone surrogate (not UTF-8: the socket write would fail).
    if ref is None or (_is_int(ref) and abs(ref) < 10**100) or (isinstance(ref, float) and math.isfinite(ref)):
        return ref
    if isinstance(ref, str) and len(ref) <= 100 and _encodable(ref):
        return ref
    raise ProtocolError(ERR_BAD_MESSAGE, "id must be a short string or number")


def _encodable(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _session(obj: dict[str, Any], ref: object, key: str = "session") -> str:
    # Checked before anything else touches the id (hub, database, upstream URL): bridge.ids.
    sid = obj.get(key)
    if not valid_session_id(sid):
        raise ProtocolError(ERR_BAD_MESSAGE, f"{key}: {SESSION_ID_RULE}", ref, reason="bad_session_id")
    assert isinstance(sid, str)
    return sid


def parse_client_message(text: str) -> ClientOp:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        raise ProtocolError(ERR_BAD_MESSAGE, "not JSON") from None
    if not isinstance(obj, dict):
        raise ProtocolError(ERR_BAD_MESSAGE, "a message is a JSON object")
    ref = _ref(obj)
    op = obj.get("op")
    if op == "subscribe":
        after = obj.get("after")
        if after is not None and (not _is_int(after) or not 0 <= after <= MAX_SEQ):
            raise ProtocolError(ERR_BAD_MESSAGE, f"after must be an integer from 0 to {MAX_SEQ} or omitted", ref)
        return Subscribe(_session(obj, ref), after, ref)
    if op == "unsubscribe":
        return Unsubscribe(_session(obj, ref), ref)
    if op == "ping":
        return Ping(ref)
    if op == "sessions":
        limit = obj.get("limit", 100)
        if not _is_int(limit) or not 1 <= limit <= SESSIONS_PAGE_MAX:
            raise ProtocolError(ERR_BAD_MESSAGE, f"limit must be an integer from 1 to {SESSIONS_PAGE_MAX}", ref)
        cursor = obj.get("next")
        if cursor is not None and not (isinstance(cursor, str) and len(cursor) <= 200 and _encodable(cursor)):
            raise ProtocolError(ERR_BAD_MESSAGE, "next must be the `next` of a previous sessions reply", ref)
        parent = _session(obj, ref, "parent") if obj.get("parent") is not None else None
        return ListSessions(ref, limit, cursor, parent)
    if op == "command":
        return _command(obj, ref)
    raise ProtocolError(ERR_BAD_MESSAGE, f"unknown op {str(op)[:40]!r}", ref)


def _command(obj: dict[str, Any], ref: object) -> CommandOp:
    command = obj.get("command")
    if not isinstance(command, str) or not 1 <= len(command) <= 40:
        raise ProtocolError(ERR_BAD_MESSAGE, "command must name a command", ref)
    session = _session(obj, ref) if obj.get("session") is not None else None
    request_id = obj.get("request_id")
    if request_id is not None and not isinstance(request_id, str):
        raise ProtocolError(ERR_BAD_MESSAGE, "request_id must be a string", ref)
    body = {k: v for k, v in obj.items() if k not in _COMMAND_FRAME_KEYS}
    if command == "slash_command" and "name" in body:  # the frame's `command` is taken: the HTTP body's is `name`
        body["command"] = body.pop("name")
    return CommandOp(command, session, request_id, body, ref)
