"""The viewer renders a legacy-driven turn like a v2 turn, in real headless Chromium: the legacy capture
x5 (a tool call that asks for permission) is committed by the real writer and relayed live as the bridge
does (docs/legacy.md), and the page shows the prompt, the streamed then final text, the tool card with
input, output, status and duration, the step's tokens and the permission request and its answer, from the
frames' `kind` and `fields` alone (docs/websocket.md §2.3). No opencode serve needed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from bridge.fanout.relay import LiveRelay
from bridge.http.app import build_app
from bridge.store.db import make_engine
from tests.e2e.test_fanout_viewer import Page, browser, chromium_devtools  # noqa: F401  (fixtures)
from tests.support.fanout_node import Node
from tests.support.legacy_rows import legacy_session, message_store
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e


async def not_ready() -> dict[str, Any]:
    return {"started": {"ok": False}}


@pytest.fixture
async def viewer_node(database_url: str) -> AsyncIterator[tuple[Node, str]]:
    engine = make_engine(database_url)
    node = Node(engine, database_url)
    server = TestServer(build_app(not_ready, websocket=node.service), host="127.0.0.1")
    await server.start_server()
    tasks = [asyncio.create_task(node.feed.run()), asyncio.create_task(node.listener.run())]
    try:
        await wait_until(node.listener.connected.is_set, 20, 0.02, message="LISTEN connected")
        yield node, str(server.make_url("")).rstrip("/")
    finally:
        for t in tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await server.close()
        await engine.dispose()


def text_of(selector: str) -> str:
    return f"(() => {{ const e = document.querySelector({selector!r}); return e ? e.textContent : null }})()"


async def test_the_viewer_shows_a_legacy_tool_turn_with_its_permission(
    viewer_node: tuple[Node, str], browser: Page  # noqa: F811
) -> None:
    node, url = viewer_node
    session_id, events = legacy_session("x5-legacy-permission")
    _, messages = message_store("x5-legacy-permission")
    (tool,) = [p for m in messages for p in m["parts"] if p["type"] == "tool"]
    final = [p["text"] for m in messages if m["info"]["role"] == "assistant" for p in m["parts"]
             if p["type"] == "text"][-1]
    relay = LiveRelay(node.hub, node.store)
    await browser.open(f"{url}/?token={node.token()}&session={session_id}")
    await wait_until(lambda: browser.js("document.getElementById('status').textContent.includes('head')"),
                     30, 0.1, message="viewer subscribed")

    asked_at = next(i for i, e in enumerate(events) if e.kind == "permission:asked")
    for ev in events[: asked_at + 1]:
        await (node.write(session_id, [ev]) if ev.seq is not None else relay.on_live_event(ev))
    pending = await wait_until(lambda: browser.js(text_of(".msg.permission.pending")), 30, 0.05,
                               message="pending permission on the page")
    assert "bash" in pending and tool["state"]["input"]["command"] in pending
    for ev in events[asked_at + 1 :]:
        await (node.write(session_id, [ev]) if ev.seq is not None else relay.on_live_event(ev))

    shown = await wait_until(lambda: browser.js(text_of(".msg.text.ended")), 30, 0.05, message="final text")
    assert shown == final
    answered = await wait_until(lambda: browser.js(text_of(".msg.permission.replied")), 30, 0.05,
                                message="answered permission")
    assert answered.startswith("Permission once: bash")
    card: dict[str, Any] = await browser.js("""(() => { const c = document.querySelector('.tool-card');
        return { n: document.querySelectorAll('.tool-card').length, cls: c.className,
                 name: c.querySelector('.tool-name').textContent, input: c.querySelector('.tool-input').textContent,
                 output: c.querySelector('.tool-output').textContent,
                 duration: c.querySelector('.tool-duration').textContent } })()""")
    assert card["n"] == 1 and "success" in card["cls"] and card["name"] == "bash"
    assert tool["state"]["input"]["command"] in card["input"] and card["output"] == tool["state"]["output"]
    assert card["duration"]
    prompt = await browser.js(text_of(".msg.user"))
    assert prompt is not None and prompt.startswith("MOCK:perm")
    assert await browser.js("document.querySelectorAll('.msg.user.queued').length") == 0  # taken
    tokens = await browser.js("[...document.querySelectorAll('.step-meta .tokens')].map(e => e.textContent)")
    assert tokens and all("in 100" in t for t in tokens)
    assert await browser.js("document.querySelectorAll('.msg.text').length") == 1
