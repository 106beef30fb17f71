"""Query parameters of the `/v1` read routes, checked before they reach the database: a bad one is a
`BadRequest` (a 400 naming the parameter), never a 500 from the driver (bridge.http.audit)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from aiohttp import web

from bridge import metrics
from bridge.errors import BadRequest
from bridge.ids import SESSION_ID_PATTERN, SESSION_ID_RULE, valid_session_id

# A time: an RFC 3339 date-time (seconds required, fraction up to 6 digits, `Z` or an offset), with a date
# that exists (29 February in leap years only) in years 0001-9999. The OpenAPI document carries the same
# expression; a time whose UTC form falls outside those years is clamped to them.
_YEAR = "(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
_LEAP = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (f"(?:{_YEAR}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)"
         f"|(?:0[13578]|1[02])-31)|{_LEAP}-02-29)")
TIME_PATTERN = (f"^{_DATE}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{{1,6}})?"
                "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$")
_TIME = re.compile(TIME_PATTERN)
_MAX_SEQ_DIGITS = 18  # a seq in a paging cursor: 1 to 18 digits (below 2^63; a seq never gets near)
TOOL_CURSOR_PATTERN = f"{SESSION_ID_PATTERN[:-1]}:[0-9]{{1,{_MAX_SEQ_DIGITS}}}$"
_TOOL_CURSOR = re.compile(TOOL_CURSOR_PATTERN)
EMPTY = "must not be empty: omit the parameter instead"


def _raw(request: web.Request, name: str) -> str | None:
    """The parameter as sent; an empty one (`until=`) is refused rather than read as absent."""
    raw = request.query.get(name)
    if raw == "":
        raise BadRequest(f"{name} {EMPTY}")
    return raw


def query_int(request: web.Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = _raw(request, name)
    if raw is None:
        return default
    try:
        v = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer") from None
    if not lo <= v <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}")
    return v


def query_text(request: web.Request, name: str) -> str | None:
    raw = _raw(request, name)
    if raw is None:
        return None
    if "\x00" in raw:  # PostgreSQL text cannot hold NUL: refuse instead of failing in the driver
        raise BadRequest(f"{name} must not contain NUL")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (undecodable percent-escapes): not text to the driver
        raise BadRequest(f"{name} must be UTF-8 text") from None
    if len(raw) > 1000:
        raise BadRequest(f"{name} must be at most 1000 characters")
    return raw


def query_session(request: web.Request, name: str) -> str | None:
    raw = _raw(request, name)
    if raw is None:
        return None
    if not valid_session_id(raw):
        metrics.BAD_SESSION_IDS.labels(surface="http").inc()
        raise BadRequest(f"{name}: {SESSION_ID_RULE}")
    return raw


def query_time(request: web.Request, name: str) -> datetime | None:
    raw = _raw(request, name)
    if raw is None:
        return None
    if _TIME.fullmatch(raw) is None:
        raise BadRequest(f"{name} must be an RFC 3339 time between years 1 and 9999, e.g. 2026-11-30T03:00:00Z")
    t = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    try:
        return t.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC: the earliest (or latest) time
        return (datetime.min if t.year == 1 else datetime.max).replace(tzinfo=UTC)


def query_tool_cursor(request: web.Request, name: str) -> tuple[str, int] | None:
    """A tool-call paging cursor `<session_id>:<seq>` as returned in `next`."""
    raw = query_text(request, name)
    if raw is None:
        return None
    if _TOOL_CURSOR.fullmatch(raw) is None:
        raise BadRequest(f"{name} must be '<session_id>:<seq>' as returned in next")
    sid, _, seq = raw.rpartition(":")
    return sid, int(seq)
