"""The bridge's own HTTP surface: health and metrics (audit API and WebSocket come with #3/#5)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bridge import metrics

ReadinessCheck = Callable[[], Awaitable[dict[str, Any]]]

READINESS_KEY: web.AppKey[ReadinessCheck] = web.AppKey("readiness")


async def livez(request: web.Request) -> web.Response:
    # Process alive and the event loop answering; no dependency checks by design.
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    checks = await request.app[READINESS_KEY]()
    ok = all(bool(v.get("ok")) for v in checks.values())
    body: dict[str, Any] = {"status": "ok" if ok else "unavailable"}
    if "verbose" in request.query or not ok:
        body["checks"] = checks
    return web.json_response(body, status=200 if ok else 503)


async def metrics_handler(request: web.Request) -> web.Response:
    return web.Response(body=generate_latest(metrics.REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})


def build_app(readiness: ReadinessCheck) -> web.Application:
    app = web.Application()
    app[READINESS_KEY] = readiness
    app.router.add_get("/livez", livez)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    return app
