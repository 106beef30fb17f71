"""The viewer's question card in real headless Chromium against a real bridge and the real opencode serve:
a legacy question shows its options and the session `waiting` in the list; choosing an option and Answer
sends it through the bridge (the model's next request carries it) and the card turns answered. The question
shows once, as a question (the question tool's card does not repeat it as input JSON)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.auth import mint_token
from tests.e2e.test_fanout_viewer import Page, browser, chromium_devtools  # noqa: F401  (fixtures)
from tests.support.bridge_proc import running_bridge
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "viewer-questions"
SECRET = "viewer-questions-" + "y" * 40


async def test_the_viewer_shows_a_question_and_answers_it(
    opencode: OpencodeServe, mock_llm: MockLLM, tmp_path: Path, database_url: str, browser: Page  # noqa: F811
) -> None:
    async with running_bridge(tmp_path, opencode.base_url, database_url, show_log_tail=30,
                              BRIDGE_UPSTREAM_NAME=UPSTREAM, BRIDGE_AUTH_SECRET=SECRET) as bridge:
        sid = await opencode.create_session()
        await browser.open(f"{bridge.url}/?token={mint_token(SECRET, UPSTREAM, None, 600, 'carol', scope='prompt')}"
                           f"#/sessions/{sid}")
        await wait_until(lambda: browser.js("document.getElementById('session-id').textContent"), 30, 0.1,
                         message="session selected")
        await opencode.prompt_async(sid, "MOCK:question from the viewer")
        await wait_until(lambda: browser.js("document.querySelector('.msg.question.pending .q-answer-button') "
                                            "!== null"), 60, 0.1, message="question card with buttons")
        labels = await browser.js("[...document.querySelectorAll('.msg.question.pending .q-label')]"
                                  ".map(x => x.textContent).join(',')")
        assert labels == "Red,Blue"
        assert await browser.js("document.querySelector('.msg.question.pending input[value=Red]').type") == "radio"
        # The question is shown once, as a question: not again as the question tool's input JSON.
        await wait_until(lambda: browser.js("document.querySelector('.tool-card.tool-question') !== null"), 30, 0.1,
                         message="the question tool's card")
        shown = await browser.js("document.getElementById('transcript').innerText")
        assert shown.count("Which color do you prefer?") == 1 and '"questions"' not in shown, shown
        await wait_until(lambda: browser.js(
            f"(document.querySelector('#sessions li[data-session=\"{sid}\"] .badge') || {{}}).textContent "
            "=== 'waiting for question'"), 30, 0.1, message="waiting in the session list")

        await browser.js("document.querySelector('.msg.question.pending input[value=Blue]').click()")
        await browser.js("document.querySelector('.msg.question.pending .q-answer-button').click()")
        after = await mock_llm.wait_for_request("question", 1)
        assert any("Blue" in r for r in after.tool_results)
        shown = await wait_until(lambda: browser.js(
            "(document.querySelector('.msg.question.answered') || {}).textContent"), 30, 0.1,
            message="answered card")
        assert "Question answered" in shown and "Color: Blue" in shown
