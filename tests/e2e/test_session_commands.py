"""Session commands through the bridge on the real `opencode serve` 1.18.33 with the mock provider
(docs/commands.md "Session commands"): a project's slash command is listed by `GET /v1/commands`, run by
`POST /v1/sessions/{id}/command` — the model gets the command's template with the arguments, once, also
when the same `command_id` is sent again — and `POST /v1/sessions/{id}/fork` makes a new session holding the
conversation, the same one for a retry."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mock_llm import HELLO_TEXT, MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

from .test_session_content import Bridge, bridge, token  # noqa: F401

pytestmark = pytest.mark.e2e

TEMPLATE = "MOCK:text greet $ARGUMENTS please"


async def project_with_a_command(opencode: OpencodeServe, tmp_path: Path) -> Path:
    project = await opencode.create_project(tmp_path / "cmd-project", "a project with a slash command\n")
    command = project / ".opencode" / "command" / "greet.md"
    command.parent.mkdir(parents=True)
    command.write_text(f"---\ndescription: Greets through the mock\n---\n{TEMPLATE}\n")
    return project


async def test_a_slash_command_is_listed_and_runs_once_and_a_fork_copies_the_conversation(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge: Bridge, tmp_path: Path  # noqa: F811
) -> None:
    project = await project_with_a_command(opencode, tmp_path)
    sid = await opencode.create_session(project)
    prompt = token("prompt", [sid])

    status, listed = await bridge.get(f"/v1/commands?session={sid}", prompt)
    assert status == 200, listed
    greet = [c for c in listed["data"] if c["name"] == "greet"]
    assert len(greet) == 1 and greet[0]["description"] == "Greets through the mock", listed

    body = {"command_id": "slash-1", "command": "greet", "arguments": "world"}
    status, ran = await bridge.post(f"/v1/sessions/{sid}/command", body, prompt)
    assert status == 200 and ran["command"] == "greet" and ran["message_id"].startswith("msg_"), ran
    status, again = await bridge.post(f"/v1/sessions/{sid}/command", body, prompt)
    assert (status, again) == (200, ran)  # answered from its row: not sent twice
    await opencode.wait_legacy_idle(sid, 1)
    asked = [r for r in mock_llm.requests if r.carries("greet world please") and r.directive != "title"]
    assert len(asked) == 1 and asked[0].outcome == "completed"  # the template with the arguments, once
    messages = await opencode.legacy_messages(sid)
    users = [m["info"]["id"] for m in messages if m["info"]["role"] == "user"]
    assert users == [ran["message_id"]]  # the bridge's derived message id, one user message
    texts = [p.get("text") for m in messages if m["info"]["role"] == "assistant" for p in m["parts"]
             if p.get("type") == "text"]
    assert HELLO_TEXT in texts

    control = token("control", [sid])
    status, forked = await bridge.post(f"/v1/sessions/{sid}/fork", {"command_id": "fork-1"}, control)
    assert status == 200 and forked["forked_session_id"] not in (None, sid), forked
    child = forked["forked_session_id"]
    status, again = await bridge.post(f"/v1/sessions/{sid}/fork", {"command_id": "fork-1"}, control)
    assert (status, again) == (200, forked)  # one fork for one command_id
    copied = await opencode.legacy_messages(child)
    assert [p.get("text") for m in copied if m["info"]["role"] == "user" for p in m["parts"]
            if p.get("type") == "text"] == [p.get("text") for m in messages if m["info"]["role"] == "user"
                                            for p in m["parts"] if p.get("type") == "text"]

    async def mirrored() -> bool:  # the bridge follows the new session like any other
        status, _ = await bridge.get(f"/v1/sessions/{child}")
        return status == 200

    await wait_until(mirrored, 60, 0.2, message="the forked session mirrored")
    status, _ = await bridge.post(f"/v1/sessions/{sid}/fork", {"command_id": "fork-2"}, prompt)
    assert status == 403  # a fork needs control
