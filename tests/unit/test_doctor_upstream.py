"""`doctor`'s upstream checks through the upstream client, on an in-memory transport."""

from __future__ import annotations

import base64
from email.utils import formatdate

from bridge.config import Secret, Settings
from bridge.ops.doctor import Check, check_upstream, render
from bridge.upstream.transport import MockTransport, Request, Response, bytes_body
from tests.support.memory_upstream import json_response

NOW = 1_796_000_000.0


def serve(password: str | None = None, model: str = "mock/mock-1") -> MockTransport:
    async def handler(request: Request) -> Response:
        if password is not None:
            sent = request.headers.get("Authorization", "")
            if base64.b64decode(sent.removeprefix("Basic ") or "Og==").decode().split(":", 1)[-1] != password:
                return json_response(401, {"_tag": "Unauthorized", "message": "no"})
        if request.path == "/global/health":
            return json_response(200, {"healthy": True, "version": "1.18.33"}, {"Date": formatdate(NOW + 2)})
        if request.path == "/config":
            return json_response(200, {"model": model})
        if request.path == "/api/provider":
            return json_response(200, {"data": [{"id": "mock"}]})
        return json_response(404, {})

    return MockTransport(handler)


async def run(settings: Settings, transport: MockTransport) -> tuple[list[Check], float | None]:
    checks: list[Check] = []
    skew = await check_upstream(settings, checks, lambda: NOW, transport=transport)
    return checks, skew


async def test_a_healthy_upstream_passes_every_check_and_reports_its_clock() -> None:
    checks, skew = await run(Settings(upstream_url="http://serve.test:4096"), serve())
    assert all(c.ok for c in checks), render(checks)
    assert {c.name for c in checks} == {"upstream", "upstream auth", "upstream generation", "upstream version",
                                        "default model"}
    assert next(c for c in checks if c.name == "upstream generation").detail == (
        "OpenCode 1.18.33 (1.x, from GET /global/health): the 1.x driver")
    assert skew == 2.0


def serve_2x() -> MockTransport:
    """A 2.x serve as its source reads (docs/upstream.md "OpenCode 2.x"): `/api/info` names the version,
    1.x routes answer HTML (the web app)."""

    async def handler(request: Request) -> Response:
        if request.path == "/api/info":
            return json_response(200, {"version": "2.0.17", "pid": 9, "urls": [], "paths": {"tmp": "/tmp"}})
        if request.path == "/api/health":
            return json_response(200, {"healthy": True, "version": "2.0.17", "pid": 9})
        return Response(200, {"Content-Type": "text/html"}, bytes_body(b"<!doctype html><html></html>"))

    return MockTransport(handler)


async def test_a_2x_serve_is_checked_for_its_generation_and_skips_the_1x_checks() -> None:
    transport = serve_2x()
    checks, _ = await run(Settings(upstream_url="http://serve.test:4096"), transport)
    assert [(c.name, c.ok) for c in checks] == [("upstream", True), ("upstream auth", True),
                                                ("upstream generation", True)]
    assert checks[-1].detail == "OpenCode 2.0.17 (2.x, from GET /api/info): the 2.x driver"
    assert not any(r.path in ("/config", "/api/provider") for r in transport.requests)
    # the 2.x driver turned off: the check fails with what to do
    checks, _ = await run(Settings(upstream_url="http://serve.test:4096", upstream_generation="1"), serve_2x())
    gen = checks[-1]
    assert (gen.name, gen.ok, gen.detail) == ("upstream generation", False, "OpenCode 2.0.17 (2.x, from GET /api/info)")
    assert gen.fix.startswith("the upstream at http://serve.test:4096 is OpenCode 2.0.17 (GET /api/info), but "
                              "BRIDGE_UPSTREAM_GENERATION=1: set it to auto (or 2)")


async def test_a_1x_serve_with_generation_2_configured_fails_the_check() -> None:
    checks, _ = await run(Settings(upstream_url="http://serve.test:4096", upstream_generation="2"), serve())
    gen = next(c for c in checks if c.name == "upstream generation")
    assert not gen.ok and "BRIDGE_UPSTREAM_GENERATION=2: set it to auto (or 1)" in gen.fix


async def test_the_password_is_sent_by_the_client_and_a_wrong_one_is_a_failed_auth_check() -> None:
    checks, _ = await run(Settings(upstream_url="http://serve.test", upstream_password=Secret("right")),
                          serve("right"))
    assert all(c.ok for c in checks)
    checks, _ = await run(Settings(upstream_url="http://serve.test", upstream_password=Secret("wrong")),
                          serve("right"))
    auth = next(c for c in checks if c.name == "upstream auth")
    assert not auth.ok and "refused our username/password" in auth.detail


async def test_credentials_in_the_url_authenticate_and_never_appear_in_the_report() -> None:
    transport = serve("hunter2")
    checks, _ = await run(Settings(upstream_url="http://opencode:hunter2@serve.test:4096"), transport)
    text = render(checks)
    assert all(c.ok for c in checks), text
    assert "hunter2" not in text and "http://serve.test:4096" in text
    assert all("hunter2" not in r.url for r in transport.requests)
