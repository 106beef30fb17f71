"""What the upstream answers, read safely: typed errors from status and `{_tag, message}` (or
`{name, data.message}`) bodies, JSON decoded leniently, bodies read up to a bound and no further
(docs/upstream.md §6). Used by `bridge.upstream.client`; no request is made here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridge.errors import (
    BodyTooLarge,
    InvalidRequest,
    SessionNotFound,
    Unauthorized,
    UpstreamError,
    UpstreamUnavailable,
)
from bridge.perf.jsonload import lenient_loads
from bridge.upstream.transport import Response

ERROR_BODY_BYTES = 64 * 1024  # enough for any error envelope's message


@dataclass(frozen=True)
class HistoryPage:
    events: list[dict[str, Any]]
    has_more: bool


@dataclass(frozen=True)
class ServerHealth:
    """What `doctor` needs of `/global/health`: any HTTP answer, its body and the server's clock."""

    status: int
    body: Any
    server_time: float | None  # the `Date` header, seconds since the epoch


def error_for(status: int, body: Any, what: str) -> UpstreamError:
    tag = body.get("_tag") if isinstance(body, dict) else None
    msg = body.get("message") if isinstance(body, dict) else None
    if not isinstance(msg, str) and isinstance(body, dict):
        data = body.get("data")
        msg = data.get("message") if isinstance(data, dict) else None
    text = f"{what}: HTTP {status}" + (f" {tag}" if isinstance(tag, str) else "")
    if isinstance(msg, str):
        text += f": {msg[:500]}"
    tag_s = tag if isinstance(tag, str) else None
    if status == 404:
        return SessionNotFound(text, status, tag_s)
    if status == 400:
        return InvalidRequest(text, status, tag_s)
    if status == 401:
        return Unauthorized(text + " (check BRIDGE_UPSTREAM_USERNAME/PASSWORD)", status, tag_s)
    if status >= 500:
        return UpstreamUnavailable(text, status, tag_s)
    return UpstreamError(text, status, tag_s)


def decode_json(raw: bytes) -> Any:
    try:
        return lenient_loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


async def read_bounded(resp: Response, limit: int, what: str) -> bytes:
    declared = resp.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"{what}: body of {declared} bytes exceeds the bound of {limit}", limit)
    buf = bytearray()
    async for chunk in resp.body:
        buf += chunk
        if len(buf) > limit:
            raise BodyTooLarge(f"{what}: body exceeds the bound of {limit} bytes", limit)
    return bytes(buf)


async def error_body(resp: Response) -> Any:
    try:
        return decode_json(await read_bounded(resp, ERROR_BODY_BYTES, "error body"))
    except (BodyTooLarge, UpstreamUnavailable):
        return None


def session_page(page: object) -> list[Any]:
    """The items of one `GET /api/session` page (its `data`), or `UpstreamError` if they are no list."""
    if not isinstance(page, list):
        raise UpstreamError("GET /api/session: data is not a list")
    return page


def next_cursor(body: object, page: list[Any], seen: set[str]) -> str | None:
    """The `cursor.next` of a `GET /api/session` answer, added to `seen`; None at the end: an empty page,
    no cursor, or one already followed (a serve that loops ends the walk)."""
    cursor = body.get("cursor") if isinstance(body, dict) else None
    nxt = cursor.get("next") if isinstance(cursor, dict) else None
    if not page or not isinstance(nxt, str) or nxt in seen:
        return None
    seen.add(nxt)
    return nxt
