"""`/v1/ws` of a real bridge process on the real `opencode serve` 1.18.33 with the mock provider: the
durable sequence a client receives equals the upstream's `/history`, deltas add up to the final text,
resume after a disconnect and after a bridge restart is exact, and two bridge processes on one
database deliver the same sequence."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from bridge.auth import mint_token
from tests.support.bridge_proc import BridgeProcess
from tests.support.fanout_client import WsClient
from tests.support.mock_llm import HELLO_TEXT, MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "e2e"
SECRET = "e2e-secret-" + "x" * 40



async def connect(clients: list[WsClient], bridge: BridgeProcess, session: str | None = None) -> WsClient:
    token = mint_token(SECRET, UPSTREAM, [session] if session else None, 600)
    c = await WsClient.connect(bridge.url, token)
    clients.append(c)
    return c


async def started(make: Callable[..., BridgeProcess], name: str = "bridge") -> BridgeProcess:
    b = make(name, BRIDGE_AUTH_SECRET=SECRET)
    b.start()
    await b.wait_ready(60)
    return b


async def caught_up(clients: list[WsClient], bridge: BridgeProcess, sid: str) -> WsClient:
    """A client of `bridge` subscribed to `sid` from the start and caught up."""
    c = await connect(clients, bridge, sid)
    await c.subscribe(sid)
    await c.wait_for("caught_up", session=sid)
    return c


async def a_session(opencode: OpencodeServe, make: Callable[..., BridgeProcess],
                    clients: list[WsClient]) -> tuple[BridgeProcess, str, WsClient]:
    """A bridge, a new session upstream, and a client caught up on it."""
    bridge = await started(make)
    sid = await opencode.create_session()
    return bridge, sid, await caught_up(clients, bridge, sid)


def sync_ids(log: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(int(e["seq"]), str(e["id"])) for e in log]


def text_ended(c: WsClient, sid: str) -> dict[str, Any]:
    """The one `text:end` of the turn, its text the mock's, its part's deltas adding up to that text."""
    ended = [m for m in c.of("event", sid) if m["kind"] == "text:end"]
    assert [m["fields"]["text"] for m in ended] == [HELLO_TEXT]  # the final text, once, however often re-sent
    part = ended[0]["fields"]["part_id"]
    deltas = [m for m in c.of("delta", sid) if m["kind"] == "delta:text" and m["part_id"] == part]
    assert deltas and "".join(d["delta"] for d in deltas) == HELLO_TEXT
    return ended[0]


def received(c: WsClient, sid: str) -> list[tuple[int, str]]:
    return [(m["seq"], m["event_id"]) for m in c.of("event", sid)]


async def wait_same_as_history(c: WsClient, serve: OpencodeServe, sid: str, after: int = -1,
                               timeout: float = 60) -> list[tuple[int, str]]:
    state: dict[str, Any] = {}

    async def same() -> bool:
        # The sync log from seq 0: a v2 session's is its `session.created` and then its /history
        want = [i for i in sync_ids(await serve.sync_log(sid)) if i[0] > after]
        got = received(c, sid)
        state.update(want=len(want), got=len(got))
        return bool(want) and got == want

    await wait_until(same, timeout, 0.1, message=f"client events == sync log after {after}: {state}")
    return received(c, sid)


async def test_a_subscriber_gets_every_durable_event_in_order_and_deltas_that_add_up_to_the_text(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient]
) -> None:
    _, sid, c = await a_session(opencode, bridge_processes, clients)
    await opencode.prompt(sid, "MOCK:text Say hello.")
    await opencode.wait_idle(sid, 60)
    await wait_same_as_history(c, opencode, sid)

    ended = text_ended(c, sid)
    deltas = [m for m in c.of("delta", sid) if m["kind"] == "delta:text"]
    # Ordering against durable events: `after_seq` never goes back, and the deltas were all sent before
    # the text.ended that carries the whole text (deltas take the short path; durable ones are stored first).
    after_seqs = [d["after_seq"] for d in deltas]
    assert after_seqs == sorted(after_seqs) and after_seqs[-1] < ended["seq"]
    positions = [c.messages.index(d) for d in deltas]
    assert max(positions) < c.messages.index(ended)


async def test_a_client_that_disconnects_mid_turn_resumes_with_exactly_the_missing_events(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient]
) -> None:
    bridge = await started(bridge_processes)
    sid = await opencode.create_session()
    first = await connect(clients, bridge, sid)
    await first.subscribe(sid)
    await first.wait_for("caught_up", session=sid)
    await opencode.prompt(sid, "MOCK:gate:ws1:2 Start talking")
    await mock_llm.wait_gate_reached("ws1", timeout=30)
    await first.wait_for("event", session=sid, kind="text:start", timeout=30)
    await first.close()
    seen = received(first, sid)
    last = seen[-1][0]
    mock_llm.release("ws1")
    await opencode.wait_idle(sid, 60)

    second = await connect(clients, bridge, sid)
    await second.subscribe(sid, last)
    await wait_same_as_history(second, opencode, sid, after=last)
    history = sync_ids(await opencode.sync_log(sid))
    assert seen + received(second, sid) == history


async def test_after_a_bridge_restart_an_old_seq_resumes_exactly_after_it(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient]
) -> None:
    bridge = await started(bridge_processes, "bridge-1")
    sid = await opencode.create_session()
    c = await connect(clients, bridge, sid)
    await c.subscribe(sid)
    await opencode.prompt(sid, "MOCK:text First turn")
    await opencode.wait_idle(sid, 60)
    before = await wait_same_as_history(c, opencode, sid)
    old_seq = before[len(before) // 2][0]
    await c.close()
    assert bridge.kill() == -9
    await opencode.prompt(sid, "MOCK:tool A turn while the bridge is down")
    await opencode.wait_idle(sid, 60)

    again = await started(bridge_processes, "bridge-2")
    c2 = await connect(clients, again, sid)
    await c2.subscribe(sid, old_seq)
    got = await wait_same_as_history(c2, opencode, sid, after=old_seq)
    assert got[0][0] > old_seq and len(got) > len(before) - len(before) // 2
    assert c2.of("subscribed")[0]["complete"] is True


async def test_two_clients_on_two_bridge_processes_see_the_same_durable_sequence_and_status(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient]
) -> None:
    one, two = await asyncio.gather(started(bridge_processes, "bridge-a"), started(bridge_processes, "bridge-b"))
    sid = await opencode.create_session()
    a, b = await asyncio.gather(caught_up(clients, one, sid), caught_up(clients, two, sid))
    await opencode.prompt(sid, "MOCK:tool Run echo")
    await opencode.wait_idle(sid, 60)
    got_a = await wait_same_as_history(a, opencode, sid)
    got_b = await wait_same_as_history(b, opencode, sid)
    assert got_a == got_b
    assert any(m["kind"] == "tool:success" for m in a.of("event", sid))
    # One of the two processes holds the session and computes its status; the clients of both get it.
    for c in (a, b):
        await c.wait_for("status", session=sid, status="idle", timeout=30)
        assert c.of("status", sid)[-1]["status"] == "idle"


async def test_a_permission_request_is_pushed_kept_for_a_later_page_and_updated_when_answered(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient]
) -> None:
    bridge, sid, live = await a_session(opencode, bridge_processes, clients)
    await opencode.prompt(sid, "MOCK:perm Touch a file")
    asked = await live.wait_for("permission", session=sid, state="asked", timeout=60)
    assert asked["action"] == "bash" and asked["request_id"].startswith("per_")
    assert asked["data"]["resources"] == ["touch perm-test.txt"]

    later = await connect(clients, bridge, sid)  # a page opened while the request is pending
    await later.subscribe(sid)
    pending = await later.wait_for("permission", session=sid, request_id=asked["request_id"])
    assert pending["state"] == "asked"

    await opencode.request("POST", f"/api/session/{sid}/permission/{asked['request_id']}/reply",
                           json_body={"reply": "once"}, expect=(200, 204))
    replied = await live.wait_for("permission", session=sid, state="replied", timeout=30)
    assert replied["reply"] == "once" and replied["request_id"] == asked["request_id"]
    await opencode.wait_idle(sid, 60)
    await wait_same_as_history(live, opencode, sid)

    after = await caught_up(clients, bridge, sid)
    await after.send(op="ping", id="p")
    await after.wait_for("pong", id="p")
    assert after.of("permission") == []


# --- legacy-driven turns (OpenCode's own clients: docs/upstream.md §13), same frames as v2 ------------------


async def test_a_legacy_turn_reaches_the_client_whole_and_its_deltas_add_up_to_the_final_text(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient]
) -> None:
    _, sid, c = await a_session(opencode, bridge_processes, clients)
    await opencode.prompt_async(sid, "MOCK:text Say hello.")  # the web app's legacy prompt
    await opencode.wait_legacy_idle(sid, 1)
    await wait_same_as_history(c, opencode, sid)  # from seq 0: `session.created` is stored and sent too
    text_ended(c, sid)


async def test_a_legacy_permission_request_reaches_the_client_and_its_answer_is_shown(
    opencode: OpencodeServe, bridge_processes: Callable[..., BridgeProcess], clients: list[WsClient]
) -> None:
    _, sid, c = await a_session(opencode, bridge_processes, clients)
    await opencode.prompt_async(sid, "MOCK:perm go")  # a `touch`: the serve asks first

    asked = await c.wait_for("permission", 60, session=sid, state="asked")
    assert asked["runtime"] == "legacy"
    # Answered where the TUI answers it: the legacy route (docs/upstream.md §16).
    where = {"x-opencode-directory": str(opencode.project_dir)}
    await opencode.request("POST", f"/permission/{asked['request_id']}/reply", json_body={"reply": "once"},
                           headers=where)
    replied = await c.wait_for("permission", 60, session=sid, state="replied", request_id=asked["request_id"])
    assert replied["reply"] == "once"
    await wait_until(lambda: (opencode.project_dir / "perm-test.txt").exists(), 30, 0.1, message="the tool ran")
