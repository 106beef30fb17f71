"""The viewer worth opening, in real headless Chromium against a real bridge and the real opencode serve:
the session list shows title, directory, status, last activity and event count and filters; a deep link
(`/#/sessions/<id>`) selects its session; the transcript shows prompts, folded reasoning, tool cards with
input, output and duration, step tokens, the pending permission highlighted, and a timeline of turns.
A screenshot of the transcript view is taken with `Page.captureScreenshot` and checked (a PNG of the
viewport's size that is not blank). `VIEWER_SCREENSHOT=docs/viewer.png` also writes it there (that is how
the picture in the README is made)."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.demo import converse
from bridge.auth import mint_token
from tests.e2e.test_fanout_viewer import Page, browser, chromium_devtools  # noqa: F401  (fixtures)
from tests.support import png
from tests.support.bridge_proc import BridgeProcess, running_bridge
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "viewer"
SECRET = "viewer-transcript-" + "y" * 40
WIDTH, HEIGHT = 1280, 860


async def _sessions(bridge: BridgeProcess, token: str) -> dict[str, dict[str, Any]]:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http, \
            http.get(f"{bridge.url}/v1/sessions") as r:
        return {s["session_id"]: s for s in (await r.json())["data"]}


async def _list(page: Page) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = await page.js("""[...document.querySelectorAll('#sessions li')].map(li => ({
        id: li.dataset.session, selected: li.classList.contains('selected'),
        title: li.querySelector('.s-title').textContent, dir: li.querySelector('.s-dir').title,
        dirShown: li.querySelector('.s-dir').textContent,
        status: li.querySelector('.badge').textContent, activity: li.querySelector('.s-activity').textContent,
        count: li.querySelector('.s-count').textContent}))""")
    return rows


async def test_the_viewer_lists_filters_deep_links_and_shows_a_transcript_worth_reading(
    opencode: OpencodeServe, tmp_path: Path, database_url: str, browser: Page  # noqa: F811
) -> None:
    async with running_bridge(tmp_path, opencode.base_url, database_url,
                              BRIDGE_UPSTREAM_NAME=UPSTREAM, BRIDGE_AUTH_SECRET=SECRET) as bridge:
        other_dir = await opencode.create_project(tmp_path / "other-project", "another project\n")
        other = await opencode.create_session(other_dir)
        await opencode.prompt(other, "MOCK:text Say hello")
        await opencode.wait_idle(other, 60)
        convo = await converse(opencode, streaming=False)
        sid = convo.session_id
        token = mint_token(SECRET, UPSTREAM, None, 600)
        await wait_until(lambda: _counts_settled(bridge, token, {sid, other}), 30, 0.2,
                         message="both sessions mirrored")

        await browser.open(f"{bridge.url}/?token={token}#/sessions/{sid}")
        await browser.call("Emulation.setDeviceMetricsOverride",
                           {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})

        # The deep link selected the session, and its transcript is there.
        await wait_until(lambda: browser.js(
            "document.querySelector('.msg.permission.pending') !== null"), 30, 0.1, message="transcript shown")
        stored = await _sessions(bridge, token)
        rows = await wait_until(lambda: _list_when(browser, 2), 30, 0.1, message="two sessions listed")
        by_id = {r["id"]: r for r in rows}
        assert by_id[sid]["selected"] and not by_id[other]["selected"]
        assert await browser.js("document.getElementById('session-id').textContent") == sid
        for s in (sid, other):
            row = by_id[s]
            assert row["title"] and row["title"] == (stored[s]["title"] or s[:10] + "…" + s[-6:])  # its title
            assert row["dir"] == stored[s]["directory"] and row["dir"]
            assert row["dirShown"].lstrip("…") and row["dir"].endswith(row["dirShown"].lstrip("…"))
            # the conversation leaves a permission request pending: its agent waits for a person
            assert row["status"] == ("waiting for permission" if s == sid else "idle"), (s, row["status"])
            assert re.fullmatch(r"just now|\d+ s ago|[12] min ago", row["activity"]), row["activity"]
            assert row["count"] == f"{stored[s]['event_count']} events"
        assert by_id[other]["dir"].endswith("other-project")

        # The filter box narrows the list; clearing it brings everything back.
        await browser.js("(() => { const f = document.getElementById('filter'); f.value = 'other-project';"
                         " f.dispatchEvent(new Event('input')); })()")
        assert [r["id"] for r in await _list(browser)] == [other]
        assert await browser.js("document.getElementById('session-count').textContent") == "1 of 2 sessions"
        await browser.js("(() => { const f = document.getElementById('filter'); f.value = '';"
                         " f.dispatchEvent(new Event('input')); })()")
        assert len(await _list(browser)) == 2

        # Every status reads as such; a retry counts down to its next attempt.
        labels = await browser.js("""(() => { const now = Date.now();
            return [statusLabel({status: 'retrying', retry_at: now / 1000 + 30}),
                    statusLabel({status: 'retrying', retry_at: new Date(now + 5000).toISOString()}),
                    statusLabel({status: 'retrying'}), statusLabel({status: 'idle', deleted: true}),
                    badge({status: 'stalled', status_reason: 'no step started'}).className,
                    badge({status: 'parked'}).textContent,
                    // what the bridge writes (bridge.sessions.activity.retry_reason): the time in the reason
                    statusLabel({status: 'retrying', status_reason: 'attempt 2, next in 9 s ('
                                 + new Date(Math.floor(now / 1000) * 1000 + 9000).toISOString().slice(0, 19)
                                 + 'Z): Rate limited'})] })()""")
        assert labels[:6] == ["retrying in 30 s", "retrying in 5 s", "retrying", "deleted",
                              "badge status-stalled", "parked"]
        assert labels[6] in ("retrying in 9 s", "retrying in 8 s")  # a second may pass between the two clocks

        # Tool cards: input and output side by side, with status and duration.
        cards = await browser.js("""[...document.querySelectorAll('.tool-card')].map(c => ({
            name: c.querySelector('.tool-name').textContent, status: c.querySelector('.tool-status').textContent,
            input: c.querySelector('.tool-input').textContent, output: c.querySelector('.tool-output').textContent,
            duration: c.querySelector('.tool-duration').textContent, asking: c.classList.contains('asking')}))""")
        bash, read, touch = cards
        assert (bash["name"], bash["status"]) == ("bash", "success")
        assert json.loads(bash["input"])["command"] == "echo hi" and "hi" in bash["output"]
        assert bash["duration"].endswith(("ms", " s"))
        assert (read["name"], read["status"]) == ("read", "success") and "hello from project" in read["output"]
        assert touch["name"] == "bash" and "touch perm-test.txt" in touch["input"] and touch["asking"]

        # The pending permission is highlighted, its turn marked on the timeline as waiting.
        perm = await browser.js("document.querySelector('.msg.permission.pending').textContent")
        assert "touch perm-test.txt" in perm
        assert await browser.js("[...document.querySelectorAll('#timeline .tl-turn')].map(t => t.className)") == [
            "tl-turn done", "tl-turn done", "tl-turn waiting"]

        # Prompts, folded reasoning, final texts, step tokens and cost.
        prompts = await browser.js("[...document.querySelectorAll('.msg.user')].map(e => e.textContent)")
        assert [p.split()[0] for p in prompts] == ["MOCK:reason", "MOCK:tool", "MOCK:perm"]
        reasoning = await browser.js("(() => { const d = document.querySelector('details.reasoning');"
                                     " return {open: d.open, text: d.querySelector('.body').textContent} })()")
        assert reasoning == {"open": False, "text": "Let me think briefly."}
        texts = await browser.js("[...document.querySelectorAll('.msg.text.ended')].map(e => e.textContent)")
        assert "Hello from the mock server." in texts and "Done: the tool returned its output." in texts
        meta = await browser.js("document.querySelector('.step-meta').textContent")
        assert "tokens in 100 · out 10" in meta and "cost $" in meta
        assert await browser.js("document.querySelectorAll('.msg.error').length") == 0

        # The screenshot of the transcript view: a PNG of the viewport that is not blank.
        shot = base64.b64decode((await browser.call("Page.captureScreenshot", {"format": "png"}))["data"])
        _save(shot, tmp_path / "viewer.png", os.environ.get("VIEWER_SCREENSHOT"))
        image = png.decode(shot)
        assert (image.width, image.height) == (WIDTH, HEIGHT)
        assert image.luminance_stddev() > 25 and image.distinct_colours() > 100

        # Another deep link selects the other session, and only its transcript is shown.
        await browser.js(f"location.hash = '#/sessions/{other}'")
        await wait_until(lambda: browser.js(
            f"document.getElementById('session-id').textContent === {json.dumps(other)}"
            " && document.querySelectorAll('.msg.text.ended').length === 1"), 30, 0.1, message="other selected")
        assert await browser.js("document.querySelectorAll('.tool-card').length") == 0
        assert [r["id"] for r in await _list(browser) if r["selected"]] == [other]

        # Subagent sessions nest under their parent, each level by activity; an orphan stands on its own.
        order = await browser.js("""nestedOrder([{session_id: 'ses_c1', parent_id: 'ses_p'}, {session_id: 'ses_q'},
            {session_id: 'ses_p'}, {session_id: 'ses_g', parent_id: 'ses_c1'},
            {session_id: 'ses_o', parent_id: 'ses_gone'}]).map(([r, d]) => r.session_id + ':' + d)""")
        assert order == ["ses_q:0", "ses_p:0", "ses_c1:1", "ses_g:2", "ses_o:0"]
        child = "ses_zzsubagent0001"  # a listed session whose parent_id names the conversation (as the API gives)
        listed = await browser.js(f"""(() => {{ state.sessions.set({json.dumps(child)}, {{
            session_id: {json.dumps(child)}, parent_id: {json.dumps(sid)}, fromWs: true,
            last_event_at: new Date().toISOString()}}); renderSessions();
            return [...document.querySelectorAll('#sessions li')].map(li => [li.dataset.session, li.dataset.depth,
                li.classList.contains('child')]) }})()""")
        at = [r[0] for r in listed].index(sid)
        assert listed[at] == [sid, "0", False] and listed[at + 1] == [child, "1", True], listed
        assert [r for r in listed if r[0] == other] == [[other, "0", False]]


def _save(shot: bytes, *paths: str | Path | None) -> None:
    for path in paths:
        if path:
            Path(path).write_bytes(shot)


async def _counts_settled(bridge: BridgeProcess, token: str, sids: set[str]) -> bool:
    stored = await _sessions(bridge, token)
    return sids <= set(stored) and all(stored[s]["event_count"] > 0 for s in sids)


async def _list_when(page: Page, n: int) -> list[dict[str, Any]] | None:
    rows = await _list(page)
    return rows if len(rows) == n else None
