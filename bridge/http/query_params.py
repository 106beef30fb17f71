"""Query parameters of the `/v1` read routes, checked before they reach the database: a bad one is a
`BadRequest` (a 400 naming the parameter), never a 500 from the driver (bridge.http.audit)."""

from __future__ import annotations

from datetime import UTC, datetime

from aiohttp import web

from bridge import metrics
from bridge.errors import BadRequest
from bridge.ids import SESSION_ID_RULE, valid_session_id


def query_int(request: web.Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer") from None
    if not lo <= v <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}")
    return v


def query_text(request: web.Request, name: str) -> str | None:
    raw = request.query.get(name)
    if not raw:
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
    raw = request.query.get(name)
    if not raw:
        return None
    if not valid_session_id(raw):
        metrics.BAD_SESSION_IDS.labels(surface="http").inc()
        raise BadRequest(f"{name}: {SESSION_ID_RULE}")
    return raw


def query_time(request: web.Request, name: str) -> datetime | None:
    raw = request.query.get(name)
    if not raw:
        return None
    try:
        t = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        # In UTC here: a time whose UTC form leaves years 1..9999 (0001-01-01T00:00:00+01:00) fails now,
        # as a 400, instead of in the driver.
        return (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        raise BadRequest(f"{name} must be an ISO 8601 time between years 1 and 9999 (UTC), "
                         "e.g. 2026-11-30T03:00:00Z") from None
