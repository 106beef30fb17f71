"""The viewer's controls in real headless Chromium against a real bridge and the real opencode serve: with a
`control` token the composer sends now (steer) and queues, a pending permission gets buttons that answer it
(the tool then runs) and Stop is there; with a `read` token none of it is shown (docs/commands.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bridge.auth import mint_token
from tests.e2e.test_fanout_viewer import Page, browser, chromium_devtools  # noqa: F401  (fixtures)
from tests.support.bridge_proc import running_bridge
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "viewer-commands"
SECRET = "viewer-commands-" + "z" * 40


async def _type_and_click(page: Page, text: str, button: str) -> None:
    await page.js(f"(() => {{ document.getElementById('prompt-text').value = {json.dumps(text)};"
                  f" document.getElementById({json.dumps(button)}).click(); return true }})()")


async def _admitted(serve: OpencodeServe, sid: str) -> list[tuple[str, str]]:
    return [(e["data"]["prompt"]["text"], e["data"]["delivery"]) for e in await serve.history(sid)
            if e["type"] == "session.next.prompt.admitted"]


async def test_the_viewer_sends_queues_and_answers_a_permission_with_a_control_token(
    opencode: OpencodeServe, tmp_path: Path, database_url: str, browser: Page  # noqa: F811
) -> None:
    async with running_bridge(tmp_path, opencode.base_url, database_url, show_log_tail=30,
                              BRIDGE_UPSTREAM_NAME=UPSTREAM, BRIDGE_AUTH_SECRET=SECRET,
                              BRIDGE_ALLOWED_DIRECTORIES=str(opencode.project_dir),
                              BRIDGE_PROMPT_RUNTIME="v2") as bridge:  # reads the v2 admissions
        control = mint_token(SECRET, UPSTREAM, None, 600, "viewer-user", scope="control")
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {control}"}) as http, \
                http.post(f"{bridge.url}/v1/sessions",
                          json={"command_id": "v-create", "directory": str(opencode.project_dir)}) as r:
            sid = (await r.json())["session_id"]

        await browser.open(f"{bridge.url}/?token={mint_token(SECRET, UPSTREAM, None, 600)}#/sessions/{sid}")
        await wait_until(lambda: browser.js("document.getElementById('session-id').textContent"), 30, 0.1,
                         message="session selected")
        # The token left the address bar once read; the deep link stays (docs/security.md).
        assert await browser.js("location.search") == ""
        assert await browser.js("location.hash") == f"#/sessions/{sid}"
        assert await browser.js("document.getElementById('composer').hidden") is True  # read token

        await browser.open(f"{bridge.url}/?token={control}#/sessions/{sid}")
        await wait_until(lambda: browser.js("document.getElementById('composer').hidden === false"), 30, 0.1,
                         message="composer shown")
        assert await browser.js("document.getElementById('stop').hidden") is False
        await _type_and_click(browser, "MOCK:text from the viewer", "send-now")
        await wait_until(lambda: _admitted(opencode, sid), 30, 0.1, message="prompt admitted")
        await opencode.wait_idle(sid, 60)
        await _type_and_click(browser, "MOCK:perm touch it", "send-queue")
        await wait_until(lambda: browser.js("document.querySelector('.msg.permission.pending .perm-once') !== null"),
                         30, 0.1, message="permission buttons shown")
        # A control token minted without --approve answers `once`, never `always` (no such button).
        assert await browser.js("document.querySelector('.msg.permission.pending .perm-always')") is None
        await browser.js("document.querySelector('.msg.permission.pending .perm-once').click()")
        await wait_until(lambda: (opencode.project_dir / "perm-test.txt").exists(), 30, 0.1, message="tool ran")
        assert await _admitted(opencode, sid) == [("MOCK:text from the viewer", "steer"),
                                                  ("MOCK:perm touch it", "queue")]
        status: Any = await wait_until(lambda: browser.js(
            "document.getElementById('composer-status').textContent.endsWith('done') && "
            "document.getElementById('composer-status').textContent"), 30, 0.1, message="answer shown")
        assert status == "answer: done"
