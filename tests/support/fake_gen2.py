"""A fake OpenCode 2.x serve on a real socket, built from 2.x's published source (no 2.x build can be
installed here, so nothing in it was checked against a running 2.x serve: docs/upstream.md "OpenCode 2.x").

Each route cites the file and commit of `anomalyco/opencode` it follows:

- `GET /api/info` → `ServerInfo {version, pid, urls, paths{tmp, home?}}`, not wrapped in `{data}`
  (packages/protocol/src/groups/server.ts@51819a10a412d8a9a1d7d68b86ac5c93ebab71b0);
- `GET /api/health` → `{healthy: true, version, pid}`
  (packages/protocol/src/groups/health.ts@7c3c912ea4ff9f83fba481be4720529b053b12d6);
- every other path → 200 `text/html` (the web app), as a third-party report says V1 routes answer on 2.0.7
  (and as 1.18.33 itself answers unknown `/api/…` paths: docs/upstream.md "OpenCode 2.x");
- Basic auth on every route, user `opencode` (2.x always asks for it: third-party report, NOTES); a
  missing or wrong password → 401 `{"_tag":"UnauthorizedError","message":…}`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from aiohttp import web

PAGE = b"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\" /></head><body></body></html>\n"


class FakeGen2Serve:
    def __init__(self, *, version: str = "2.0.17", username: str = "opencode", password: str = "pw",
                 port: int = 0) -> None:
        self.version = version
        self.username = username
        self.password = password
        self.port = port
        self.request_paths: list[str] = []
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application(middlewares=[self._auth])
        app.router.add_get("/api/info", self._info)
        app.router.add_get("/api/health", self._health)
        app.router.add_route("*", "/{tail:.*}", self._page)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port or 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.request_paths.append(request.raw_path)
        sent = request.headers.get("Authorization", "")
        try:
            user, _, password = base64.b64decode(sent.removeprefix("Basic ")).decode().partition(":")
        except ValueError:
            user, password = "", ""
        if (user, password) != (self.username, self.password):
            return web.Response(status=401, content_type="application/json", headers={
                "WWW-Authenticate": 'Basic realm="Secure Area"'},
                text=json.dumps({"_tag": "UnauthorizedError", "message": "Authentication required"}))
        response: web.StreamResponse = await handler(request)
        return response

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self.version, "pid": 4242, "urls": [self.url],
                                  "paths": {"tmp": "/tmp/opencode", "home": "/home/opencode"}})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"healthy": True, "version": self.version, "pid": 4242})

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(status=200, body=PAGE, content_type="text/html")
