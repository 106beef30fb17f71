"""The built-in viewer (`/`) in a real headless Chromium against a real bridge and opencode: the page shows
a turn's text while it streams, and the final text after. Chromium is driven over the DevTools protocol
with aiohttp (no browser download, no extra dependency). Skipped locally without `chromium`; under
CI=true a missing browser fails the test."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bridge.auth import mint_token
from tests.support.bridge_proc import running_bridge
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until, wait_until_sync

pytestmark = pytest.mark.e2e

UPSTREAM = "e2e"
SECRET = "viewer-secret-" + "x" * 40
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1"]


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    reason = "chromium not installed (Debian: apt-get install -y chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


class Page:
    """One browser tab over CDP (flattened target session on the browser's WebSocket)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())
        self.session_id: str | None = None

    async def _read(self) -> None:
        async for msg in self._ws:
            data = json.loads(msg.data)
            fut = self._waiting.pop(data.get("id", -1), None)
            if fut is not None and not fut.done():
                fut.set_result(data)

    async def call(self, method: str, params: dict[str, Any] | None = None, *, target: bool = True) -> Any:
        mid = next(self._ids)
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if target and self.session_id:
            msg["sessionId"] = self.session_id
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[mid] = fut
        await self._ws.send_str(json.dumps(msg))
        reply = await asyncio.wait_for(fut, 30)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def open(self, url: str) -> None:
        target = await self.call("Target.createTarget", {"url": url}, target=False)
        attached = await self.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                                   target=False)
        self.session_id = attached["sessionId"]

    async def js(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result.get("result", {}).get("value")

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@pytest.fixture
def chromium_devtools(tmp_path: Path) -> Iterator[str]:
    """A headless Chromium with a fresh profile; yields its browser-level DevTools WebSocket URL."""
    exe = chromium_path()
    profile = tmp_path / "chromium-profile"
    proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        wait_until_sync(lambda: port_file.exists() and len(port_file.read_text().splitlines()) >= 2, 60, 0.1,
                        message="chromium DevToolsActivePort")
        port, path = port_file.read_text().splitlines()[:2]
        yield f"ws://127.0.0.1:{port}{path}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
async def browser(chromium_devtools: str) -> AsyncIterator[Page]:
    async with aiohttp.ClientSession() as http, http.ws_connect(chromium_devtools, max_msg_size=0) as ws:
        page = Page(ws)
        try:
            yield page
        finally:
            await page.close()


async def test_the_viewer_shows_a_turn_streaming_and_its_final_text(
    opencode: OpencodeServe, tmp_path: Path, database_url: str, browser: Page
) -> None:
    async with running_bridge(tmp_path, opencode.base_url, database_url,
                              BRIDGE_UPSTREAM_NAME=UPSTREAM, BRIDGE_AUTH_SECRET=SECRET) as bridge:
        sid = await opencode.create_session()
        token = mint_token(SECRET, UPSTREAM, [sid], 600)
        await browser.open(f"{bridge.url}/?token={token}&session={sid}")
        await wait_until(lambda: browser.js("document.getElementById('status').textContent.includes('head')"),
                         30, 0.1, message="viewer subscribed")
        await opencode.prompt(sid, "MOCK:slow:10:0.3 Count slowly")
        streaming = await wait_until(
            lambda: browser.js("(() => { const e = document.querySelector('.msg.text.streaming');"
                               " return e && e.textContent.length > 0 ? e.textContent : null })()"),
            60, 0.05, message="streaming text on the page")
        await opencode.wait_idle(sid, 60)
        final = next(e["data"]["text"] for e in await opencode.history(sid)
                     if e["type"] == "session.next.text.ended")
        shown = await wait_until(
            lambda: browser.js("(() => { const e = document.querySelector('.msg.text.ended');"
                               " return e ? e.textContent : null })()"),
            30, 0.1, message="final text on the page")
        shot = await browser.call("Page.captureScreenshot", {"format": "png"})
        (tmp_path / "viewer.png").write_bytes(base64.b64decode(shot["data"]))  # kept for a human look
        assert shown == final
        assert final.startswith(streaming) and len(streaming) < len(final)
        assert await browser.js("document.querySelectorAll('.msg.text').length") == 1
