"""The viewer's composer on a legacy session (docs/commands.md, "Runtime affinity") in real headless
Chromium: Send now and Queue both reach the model with the session's memory, and a prompt queued behind
a running turn is listed under the composer until the bridge sends it."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from bridge.auth import mint_token
from tests.e2e.test_fanout_viewer import Page, browser, chromium_devtools  # noqa: F401  (fixtures)
from tests.support.bridge_proc import running_bridge
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "viewer-queue"
SECRET = "viewer-queue-" + "q" * 40


async def _type_and_click(page: Page, text: str, button: str) -> None:
    await page.js(f"(() => {{ document.getElementById('prompt-text').value = {json.dumps(text)};"
                  f" document.getElementById({json.dumps(button)}).click(); return true }})()")


def _seen(mock: MockLLM, marker: str) -> list[list[str]]:
    return [r.user_texts for r in mock.requests if r.directive != "title" and marker in r.user_text]


async def test_the_composer_sends_and_queues_on_a_legacy_session_and_lists_the_queued_prompt(
    opencode: OpencodeServe, mock_llm: MockLLM, tmp_path: Path, database_url: str, browser: Page  # noqa: F811
) -> None:
    async with running_bridge(tmp_path, opencode.base_url, database_url, show_log_tail=30,
                              BRIDGE_UPSTREAM_NAME=UPSTREAM, BRIDGE_AUTH_SECRET=SECRET) as bridge:
        sid = await opencode.create_session()
        await opencode.run_cli(sid, "MOCK:text MARKER-CLI begun in the CLI")  # a legacy session
        control = mint_token(SECRET, UPSTREAM, None, 600, "viewer-user", scope="control")
        await browser.open(f"{bridge.url}/?token={control}#/sessions/{sid}")
        await wait_until(lambda: browser.js("document.getElementById('composer').hidden === false"), 30, 0.1,
                         message="composer shown")

        await _type_and_click(browser, "MOCK:slowtool:3 MARKER-VD work", "send-now")
        await wait_until(lambda: _seen(mock_llm, "MARKER-VD"), 60, 0.05, message="the model got the steer")
        await _type_and_click(browser, "MOCK:text MARKER-VQ queued", "send-queue")
        # the `command` frame may come before the command's answer (which brings the text)
        await wait_until(lambda: browser.js(
            "(() => { const li = document.querySelector('#queued li');"
            " return li !== null && li.textContent === 'queued: MOCK:text MARKER-VQ queued' })()"),
            30, 0.05, message="queued prompt listed with its text")
        assert _seen(mock_llm, "MARKER-VQ") == []  # the running turn first
        seen = await wait_until(lambda: _seen(mock_llm, "MARKER-VQ"), 60, 0.05, message="queued prompt sent")
        assert any("MARKER-CLI" in t for t in seen[0]) and any("MARKER-VD" in t for t in seen[0])
        await wait_until(lambda: browser.js("document.querySelectorAll('#queued li').length === 0"), 30, 0.1,
                         message="queued prompt no longer listed")
        assert await browser.js("document.getElementById('composer-status').textContent") == "queued prompt sent"
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {control}"}) as http, \
                http.get(f"{bridge.url}/v1/sessions/{sid}/commands") as r:
            rows = (await r.json())["data"]
        assert sorted((c["runtime"], c["state"]) for c in rows) == [("legacy", "done"), ("legacy", "done")]
