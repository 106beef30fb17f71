"""The one error envelope of `/v1` (docs/errors.md), applied at the edge of the HTTP app.

Every `/v1` answer carries `X-Correlation-Id`; every `/v1` error answer is `{"error": {"code", "message",
"correlation_id", "retry_after"?}}` with the same id as the header. Producers build the body with
`error_response` (or bridge.errors.error_body); this middleware fills in the request's correlation id where
the producer had none of its own, keeps `retry_after` and the `Retry-After` header in step, and turns
aiohttp's own answers (no such route 404, wrong method 405, body too large 413) into the envelope, so that
no `/v1` client ever meets a second shape.
"""

from __future__ import annotations

import asyncio
import json
import math
import secrets
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware

from bridge.errors import AuthError, as_error_body, error_body

_log = structlog.get_logger("bridge.http")
CORRELATION_HEADER = "X-Correlation-Id"
V1_PREFIX = "/v1"

# aiohttp's own refusals, as codes of the envelope.
_HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 413: "too_large", 415: "unsupported_media_type"}

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(status: int, code: str, message: str, *, correlation_id: str | None = None,
                   retry_after: float | None = None) -> web.Response:
    """A `/v1` error answer in the envelope; `retry_after` also sets the `Retry-After` header."""
    resp = web.json_response(error_body(code, message, correlation_id, retry_after), status=status)
    if retry_after is not None:
        resp.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return resp


def _from_exception(e: web.HTTPException) -> web.Response:
    code = _HTTP_CODES.get(e.status, "internal" if e.status >= 500 else "bad_request")
    resp = web.json_response(error_body(code, e.reason), status=e.status)
    for name in ("Allow", "Retry-After"):
        if name in e.headers:
            resp.headers[name] = e.headers[name]
    return resp


def _retry_after_header(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _enveloped(resp: web.Response, cid: str) -> None:
    """`resp`'s error body in the envelope, with a correlation id (the header then names the same one)."""
    try:
        body = json.loads(resp.body) if isinstance(resp.body, bytes | bytearray) and resp.body else None
    except ValueError:
        body = None
    if body is None:
        body = error_body(_HTTP_CODES.get(resp.status, "internal"), resp.reason or "error")
    out = as_error_body(body)
    err = out["error"]
    assert isinstance(err, dict)
    err.setdefault("correlation_id", cid)
    header = _retry_after_header(resp.headers.get("Retry-After"))
    if "retry_after" not in err and header is not None:
        err["retry_after"] = header
    elif "retry_after" in err and header is None:
        resp.headers["Retry-After"] = str(max(1, math.ceil(float(err["retry_after"]))))
    resp.headers[CORRELATION_HEADER] = str(err["correlation_id"])
    resp.body = json.dumps(out).encode()
    resp.content_type = "application/json"


_INSTALLED: web.AppKey[bool] = web.AppKey("error_envelope_installed", bool)


def install_envelope(app: web.Application) -> None:
    """The envelope middleware on `app`, once, before any middleware added later (so it wraps the
    guards too): every module that adds `/v1` routes calls it, and so does bridge.http.security.protect."""
    if not app.get(_INSTALLED):
        app[_INSTALLED] = True
        app.middlewares.append(envelope_middleware())


def envelope_middleware() -> Middleware:
    @web.middleware
    async def envelope(request: web.Request, handler: _Handler) -> web.StreamResponse:
        if not request.path.startswith(V1_PREFIX):
            return await handler(request)
        cid = secrets.token_hex(8)  # as bridge.log.correlation_id
        try:
            resp = await handler(request)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            resp = _from_exception(e)
        except Exception as e:  # a bug: logged under the id the client is told, never the details
            if isinstance(e, asyncio.CancelledError | ConnectionError):
                raise
            _log.exception("http_handler_failed", path=request.path, correlation_id=cid)
            resp = web.json_response(error_body("internal", f"the bridge failed (correlation id {cid})"),
                                     status=500)
        if isinstance(resp, web.Response) and resp.status >= 400:
            _enveloped(resp, cid)
        elif CORRELATION_HEADER not in resp.headers and not resp.prepared:
            resp.headers[CORRELATION_HEADER] = cid
        return resp

    return envelope


# A refused token: one code per thing the client should do (docs/errors.md): `token_expired` mint a new
# one and retry, `token_revoked` and `unauthorized` stop (missing, malformed, badly signed, another
# upstream's), `forbidden` (403) the token is fine but does not grant this.
AUTH_CODES = {"expired": "token_expired", "revoked": "token_revoked", "forbidden": "forbidden"}


def auth_refusal(e: AuthError) -> web.Response:
    """401 for a token that is missing or bad, 403 for one that does not grant what was asked."""
    code = AUTH_CODES.get(e.code, "unauthorized")
    return error_response(403 if code == "forbidden" else 401, code, str(e))
