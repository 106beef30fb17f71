"""`@opencode-bridge/client` in a real browser (headless Chromium over DevTools, as the viewer tests drive it)
on a page served from another origin than the bridge (listed in BRIDGE_ALLOWED_ORIGINS), against the real
bridge, the real opencode serve 1.18.33 and the mock model. The page's `getToken` fetches tokens from its own
backend (here: the page server, minting them): the first is already expired (close 4402: a new one is asked
for), the second lives 6 s (a new one is asked for before it expires). Over `BridgeSocket` commands the page
creates a session, prompts it and sees the text stream (and, with `BridgeClient`, renames it and reads it over
REST from its origin), answers a permission and a question, and sends a
prompt whose connection drops right after it left: re-sent with the same command_id after the reconnect,
it lands once. Its `SessionState` transcript ends equal to the bridge's `GET /v1/sessions/{id}/transcript`;
every frame it got and every op it sent validates against the AsyncAPI document."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bridge.auth import mint_token
from tests.e2e.test_fanout_viewer import Page, browser, chromium_devtools  # noqa: F401  (fixtures)
from tests.support.asyncapi import check_client_op, check_server_frame
from tests.support.bridge_proc import BridgeFactory, free_port
from tests.support.mock_llm import HELLO_CHUNKS
from tests.support.opencode import OpencodeServe
from tests.support.tsclient import built_package
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "tsclient-browser"
SECRET = "tsclient-browser-" + "b" * 40
PAGE = """<!doctype html><meta charset="utf-8"><title>product page</title>
<script type="module">import * as lib from "/lib.js"; window.lib = lib;</script>"""

# The page's client: one BridgeSocket, a SessionState per watched session, and what the test inspects
# (tokens asked for, close codes, frames sent). `drop()`: the next command frame is sent, then the socket is
# closed at once, before its answer can arrive.
CLIENT = """
window.t = (() => {
  const tokens = [], asked = [], closes = [], sent = [], received = [], deltas = [], states = new Map();
  let dropNext = false;
  const webSocket = (url) => {
    const ws = new WebSocket(url);
    const send = ws.send.bind(ws);
    ws.send = (d) => {
      sent.push(JSON.parse(d));
      send(d);
      if (dropNext && JSON.parse(d).op === "command") { dropNext = false; ws.close(); }
    };
    ws.addEventListener("close", (e) => closes.push(e.code));
    return ws;
  };
  const getToken = async () => {
    asked.push(Date.now() / 1000);
    const tk = await (await fetch("/token")).text();
    tokens.push(tk);
    return tk;
  };
  const sock = new lib.BridgeSocket({ url: WS_URL, getToken, webSocket, backoff: { baseMs: 100, maxMs: 1000 } });
  sock.on("*", (f) => {
    received.push(f);
    if (f.session && states.has(f.session)) states.get(f.session).apply(f);
    if (f.type === "delta") deltas.push(f);
  });
  sock.connect();
  const api = new lib.BridgeClient({ baseUrl: BASE_URL, token: () => tokens[tokens.length - 1] });
  const watch = (sid) => { states.set(sid, new lib.SessionState(sid)); sock.subscribe(sid); };
  const exp = (tk) => JSON.parse(atob(tk.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).exp;
  const drop = () => { dropNext = true; };
  return { sock, api, tokens, asked, exp, closes, sent, received, deltas, states, watch, drop };
})();
"""


async def evaluate(page: Page, expression: str) -> Any:
    result = await page.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                  "returnByValue": True})
    if "exceptionDetails" in result:
        raise AssertionError(f"{expression[:200]}: {result['exceptionDetails']}")
    return result.get("result", {}).get("value")


@pytest.fixture
async def page_server() -> AsyncIterator[dict[str, Any]]:
    """The product's page and backend on their own origin: `/`, `/lib.js` (the package's browser build) and
    `/token` (a token for the bridge: expired, then short-lived, then for 10 minutes)."""
    bundle = (built_package() / "dist" / "browser" / "bridge-client.min.js").read_bytes()
    served: dict[str, Any] = {"tokens": 0}

    async def token(_: web.Request) -> web.Response:
        served["tokens"] += 1
        n, now = served["tokens"], time.time()
        if n == 1:
            tk = mint_token(SECRET, UPSTREAM, None, 60, "page", now=now - 3600, scope="control")
        else:
            tk = mint_token(SECRET, UPSTREAM, None, 6 if n == 2 else 600, "page", now=now, scope="control")
        return web.Response(text=tk)

    async def page(_: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def lib(_: web.Request) -> web.Response:
        return web.Response(body=bundle, content_type="text/javascript")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/lib.js", lib)
    app.router.add_get("/token", token)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    served["origin"] = f"http://127.0.0.1:{port}"
    try:
        yield served
    finally:
        await runner.cleanup()


async def _command(page: Page, name: str, fields: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = await evaluate(page, f"t.sock.command({json.dumps(name)}, {json.dumps(fields)})")
    assert result["status"] < 300, result
    return result


async def _turn_done(page: Page, sid: str, turns: int) -> list[dict[str, Any]]:
    """The page's transcript once `turns` steps finished with `stop` (and the session is idle)."""
    async def done() -> list[dict[str, Any]] | None:
        entries: list[dict[str, Any]] = await evaluate(page, f"t.states.get({json.dumps(sid)}).transcript()")
        stops = [e for e in entries if e["type"] == "assistant" and e.get("finish") == "stop"]
        idle = await evaluate(page, f"t.states.get({json.dumps(sid)}).status") == "idle"
        return entries if len(stops) >= turns and idle else None

    got: list[dict[str, Any]] | None = await wait_until(done, 90, 0.1, message=f"{turns} finished turns on the page")
    assert got is not None
    return got


async def test_a_page_on_another_origin_runs_a_conversation_through_the_package(
    opencode: OpencodeServe, bridge_processes: BridgeFactory, page_server: dict[str, Any],
    browser: Page  # noqa: F811
) -> None:
    bridge = bridge_processes(BRIDGE_AUTH_SECRET=SECRET, BRIDGE_ALLOWED_DIRECTORIES=str(opencode.project_dir),
                              BRIDGE_ALLOWED_ORIGINS=page_server["origin"], BRIDGE_PROMPT_RUNTIME="v2")
    bridge.start()
    await bridge.wait_ready(60)
    await browser.open(page_server["origin"] + "/")
    await wait_until(lambda: evaluate(browser, "typeof window.lib === 'object'"), 30, 0.1, message="package loaded")
    await evaluate(browser, CLIENT.replace("WS_URL", json.dumps(bridge.url.replace("http:", "ws:") + "/v1/ws"))
                   .replace("BASE_URL", json.dumps(bridge.url)))

    # An expired token: closed with 4402, a new one asked for through getToken.
    await wait_until(lambda: evaluate(browser, "t.sock.state === 'connected'"), 30, 0.1, message="connected")
    assert await evaluate(browser, "t.closes") == [4402]

    created = await _command(browser, "create_session", {"directory": str(opencode.project_dir)})
    sid = created["result"]["session_id"]
    await evaluate(browser, f"t.watch({json.dumps(sid)})")
    await _command(browser, "prompt", {"session": sid, "text": "MOCK:text hello", "delivery": "queue"})
    entries = await _turn_done(browser, sid, 1)
    assert [p["text"] for p in entries[-1]["parts"]] == ["".join(HELLO_CHUNKS)]
    streamed = await evaluate(browser, f"t.deltas.filter(d => d.session === {json.dumps(sid)}).map(d => d.delta)")
    assert "".join(streamed) == "".join(HELLO_CHUNKS)  # seen while it was written

    # The 6 s token was replaced before it expired: a third token asked for while the second was valid.
    await wait_until(lambda: evaluate(browser, "t.tokens.length >= 3 && t.sock.state === 'connected'"), 30, 0.1,
                     message="token refreshed before expiry")
    assert await evaluate(browser, "t.asked[2] < t.exp(t.tokens[1])"), await evaluate(
        browser, "JSON.stringify([t.asked, t.tokens.map(t.exp)])")

    # A permission, answered "once" from the page.
    await _command(browser, "prompt", {"session": sid, "text": "MOCK:perm touch it", "delivery": "queue"})
    pending = await wait_until(lambda: evaluate(
        browser, f"t.states.get({json.dumps(sid)}).pending().permissions.map(p => p.request_id)"), 60, 0.1,
        message="permission asked")
    await _command(browser, "permission_reply", {"session": sid, "request_id": pending[0], "reply": "once"})
    await _turn_done(browser, sid, 2)
    assert await evaluate(browser, f"t.states.get({json.dumps(sid)}).permissions.get({json.dumps(pending[0])}).reply") \
        == "once"
    assert (opencode.project_dir / "perm-test.txt").exists()

    # A question, answered from the page.
    await _command(browser, "prompt", {"session": sid, "text": "MOCK:question pick", "delivery": "queue"})
    asked = await wait_until(lambda: evaluate(
        browser, f"t.states.get({json.dumps(sid)}).pending().questions"), 60, 0.1, message="question asked")
    assert asked[0]["questions"][0]["question"] == "Which color do you prefer?"
    await _command(browser, "question_reply", {"session": sid, "request_id": asked[0]["request_id"],
                                               "answers": [["Red"]]})
    await _turn_done(browser, sid, 3)

    # A prompt whose socket drops before its answer: re-sent with the same command_id, it lands once.
    await evaluate(browser, "t.drop()")
    retried = await _command(browser, "prompt", {"session": sid, "text": "MOCK:text retried", "delivery": "queue",
                                                 "command_id": "page-retry-1"})
    assert retried["result"]["command_id"] == "page-retry-1"
    frames = await evaluate(browser, "t.sent.filter(f => f.command_id === 'page-retry-1')")
    assert len(frames) == 2 and frames[0]["command_id"] == frames[1]["command_id"]
    final = await _turn_done(browser, sid, 4)
    history = await opencode.history(sid)
    admitted = [e for e in history if e["type"] == "session.next.prompt.admitted"
                and "MOCK:text retried" in json.dumps(e["data"])]
    assert len(admitted) == 1

    # The page's transcript is the bridge's (which also names who asked: not on the wire).
    token = mint_token(SECRET, UPSTREAM, None, 60, "check", scope="read")
    async with aiohttp.ClientSession() as http, http.get(
            f"{bridge.url}/v1/sessions/{sid}/transcript", headers={"Authorization": f"Bearer {token}"}) as r:
        served = (await r.json())["data"]["entries"]
    asked_by = [e.pop("asked_by") for e in served if "asked_by" in e]
    assert asked_by == ["page"] * 4
    assert final == served

    # The REST routes from the page's origin too (CORS for BRIDGE_ALLOWED_ORIGINS): a POST and a GET.
    renamed = await evaluate(browser, f"""t.api.renameSession({{ path: {{ session_id: {json.dumps(sid)} }},
        body: {{ command_id: "page-title-1", title: "From the page" }} }}).then(r => [r.response.status, r.data])""")
    assert renamed[0] == 200 and renamed[1]["title"] == "From the page", renamed
    read = await evaluate(browser, f"t.api.getTranscript({{ path: {{ session_id: {json.dumps(sid)} }} }})"
                                   ".then(r => r.data.data.entries)")
    assert [e["type"] for e in read] == [e["type"] for e in served]

    # Every frame the page got and every op it sent is what the AsyncAPI document of /v1/ws describes.
    received = await evaluate(browser, "t.received")
    assert {f["type"] for f in received} >= {"hello", "subscribed", "event", "delta", "caught_up", "permission",
                                             "question", "status", "command_result"}
    assert [p for f in received for p in check_server_frame(f)] == []
    assert [p for op in await evaluate(browser, "t.sent") for p in check_client_op(op)] == []


async def test_the_page_ends_equal_to_the_serve_after_the_bridge_is_killed_mid_turn(
    opencode: OpencodeServe, bridge_processes: BridgeFactory, page_server: dict[str, Any],
    browser: Page  # noqa: F811
) -> None:
    """`kill -9` of the bridge while a turn streams, then a restart on the same port: the page's socket
    reconnects and resumes; it got every durable event of the serve once, in order, and its transcript is
    the bridge's."""
    bridge = bridge_processes(BRIDGE_AUTH_SECRET=SECRET, BRIDGE_ALLOWED_DIRECTORIES=str(opencode.project_dir),
                              BRIDGE_ALLOWED_ORIGINS=page_server["origin"], BRIDGE_PROMPT_RUNTIME="v2")
    bridge.start()
    await bridge.wait_ready(60)
    await browser.open(page_server["origin"] + "/")
    await wait_until(lambda: evaluate(browser, "typeof window.lib === 'object'"), 30, 0.1, message="package loaded")
    await evaluate(browser, CLIENT.replace("WS_URL", json.dumps(bridge.url.replace("http:", "ws:") + "/v1/ws"))
                   .replace("BASE_URL", json.dumps(bridge.url)))
    await wait_until(lambda: evaluate(browser, "t.sock.state === 'connected'"), 30, 0.1, message="connected")
    sid = (await _command(browser, "create_session", {"directory": str(opencode.project_dir)}))["result"]["session_id"]
    await evaluate(browser, f"t.watch({json.dumps(sid)})")
    await _command(browser, "prompt", {"session": sid, "text": "MOCK:slow:40:0.1 talk", "delivery": "queue"})
    await wait_until(lambda: evaluate(browser, f"t.deltas.filter(d => d.session === {json.dumps(sid)}).length > 3"),
                     60, 0.05, message="the turn streaming on the page")

    bridge.kill()
    bridge.start()
    await bridge.wait_ready(60)
    final = await _turn_done(browser, sid, 1)

    history = await opencode.history(sid)
    seqs = await evaluate(browser, f"t.received.filter(f => f.type === 'event' && f.session === {json.dumps(sid)})"
                                   ".map(f => f.seq)")
    assert [s for s in seqs if s > 0] == [e["durable"]["seq"] for e in history]  # each once, in order, none missing
    ended = [e["data"]["text"] for e in history if e["type"] == "session.next.text.ended"]
    assert [p["text"] for e in final if e["type"] == "assistant" for p in e["parts"]] == ended
    token = mint_token(SECRET, UPSTREAM, None, 60, "check", scope="read")
    async with aiohttp.ClientSession() as http, http.get(
            f"{bridge.url}/v1/sessions/{sid}/transcript", headers={"Authorization": f"Bearer {token}"}) as r:
        served = (await r.json())["data"]["entries"]
    for e in served:
        e.pop("asked_by", None)
    assert final == served


async def test_a_page_from_an_origin_not_allowed_creates_nothing(
    opencode: OpencodeServe, bridge_processes: BridgeFactory, page_server: dict[str, Any],
    browser: Page  # noqa: F811
) -> None:
    """The same page from `http://localhost:…` (another origin than the allowed `http://127.0.0.1:…`): its POST
    is refused by the browser's CORS check (no CORS headers for it), its WebSocket by the bridge (403 before
    the upgrade), and no session is created."""
    bridge = bridge_processes(BRIDGE_AUTH_SECRET=SECRET, BRIDGE_ALLOWED_DIRECTORIES=str(opencode.project_dir),
                              BRIDGE_ALLOWED_ORIGINS=page_server["origin"])
    bridge.start()
    await bridge.wait_ready(60)
    await browser.open(page_server["origin"].replace("127.0.0.1", "localhost") + "/")
    await wait_until(lambda: evaluate(browser, "typeof window.lib === 'object'"), 30, 0.1, message="package loaded")
    await evaluate(browser, CLIENT.replace("WS_URL", json.dumps(bridge.url.replace("http:", "ws:") + "/v1/ws"))
                   .replace("BASE_URL", json.dumps(bridge.url)))
    await wait_until(lambda: evaluate(browser, "t.tokens.length >= 2"), 30, 0.1, message="tokens asked for")
    before = len(await opencode.list_sessions())
    outcome = await evaluate(browser, f"""t.api.createSession({{ body: {{ command_id: "foreign-1",
        directory: {json.dumps(str(opencode.project_dir))} }} }}).then(r => [r.data === undefined, String(r.error)])""")
    assert outcome[0] is True, outcome
    assert await evaluate(browser, "t.sock.state") != "connected"
    assert await evaluate(browser, "t.received.length") == 0  # no hello: refused before the upgrade
    token = mint_token(SECRET, UPSTREAM, None, 60, "check", scope="read")
    async with aiohttp.ClientSession() as http, http.get(
            f"{bridge.url}/v1/sessions", headers={"Authorization": f"Bearer {token}"}) as r:
        assert (await r.json())["data"] == []
    assert len(await opencode.list_sessions()) == before
