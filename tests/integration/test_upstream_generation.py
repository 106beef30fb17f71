"""The serve's OpenCode generation, recognised by the real daemon (`python -m bridge run`): a 2.x serve (the
fake built from 2.x's source, tests/support/fake_gen2.py) with the 2.x driver off stops start-up with one
line naming the version and what to do — before the database is touched — also when it only appears after
start-up; a 1.x serve runs the 1.x driver and says so in /readyz; a 2.x serve with the driver on is
mirrored, nothing lost or duplicated across a kill -9 of the bridge."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from sqlalchemy import text

from bridge.auth import mint_token
from bridge.store.db import make_engine
from tests.support.bridge_proc import BridgeProcess, free_port
from tests.support.fake_gen2 import FakeGen2Serve
from tests.support.fake_upstream import FakeUpstream
from tests.support.fanout_client import WsClient
from tests.support.waiting import wait_until

# Nothing listens there: a start-up that touched the database would fail on it, not refuse the serve.
NO_DATABASE = "postgresql://nobody:x@127.0.0.1:1/none"


@pytest_asyncio.fixture
async def gen2() -> AsyncIterator[FakeGen2Serve]:
    serve = FakeGen2Serve()
    await serve.start()
    yield serve
    await serve.stop()


def _exit(bridge: BridgeProcess) -> tuple[int, list[str]]:
    rc = bridge.wait(30)
    return rc, bridge.log_path.read_text(errors="replace").splitlines()


def _one_line(lines: list[str], needle: str) -> str:
    hits = [line for line in lines if needle in line and not line.startswith("{")]
    assert len(hits) == 1, "\n".join(lines[-30:])
    assert not any("Traceback" in line or "bridge_crashed" in line for line in lines), "\n".join(lines[-30:])
    return hits[0]


async def test_a_2x_serve_with_the_2x_driver_off_stops_start_up_with_one_line_before_the_database(
        tmp_path: Path, gen2: FakeGen2Serve) -> None:
    bridge = BridgeProcess(tmp_path, gen2.url, NO_DATABASE,
                           extra_env={"BRIDGE_UPSTREAM_PASSWORD": "pw", "BRIDGE_UPSTREAM_GENERATION": "1"})
    bridge.start()
    rc, lines = await asyncio.to_thread(_exit, bridge)
    assert rc == 2
    line = _one_line(lines, "OpenCode 2.0.17")
    assert line == (f"opencode-bridge: configuration error: the upstream at {gen2.url} is OpenCode 2.0.17 "
                    "(GET /api/info), but BRIDGE_UPSTREAM_GENERATION=1: set it to auto (or 2), or point "
                    "BRIDGE_UPSTREAM_URL at an OpenCode 1.x serve")
    # Only the recognition routes were asked (authenticated), nothing of a driver's.
    assert set(gen2.request_paths) == {"/api/info", "/global/health", "/api/health"}


async def test_a_2x_serve_that_appears_after_start_up_stops_the_running_bridge(tmp_path: Path,
                                                                              database_url: str) -> None:
    port = free_port()
    # auto: the serve is down at start, the verified 1.x driver starts; the serve turns out to be 2.x
    bridge = BridgeProcess(tmp_path, f"http://127.0.0.1:{port}", database_url,
                           extra_env={"BRIDGE_UPSTREAM_PASSWORD": "pw"})
    bridge.start()
    serve = FakeGen2Serve(port=port)
    try:
        async def readyz_answers() -> bool:  # up, not ready (no upstream), the guard asking again
            async with aiohttp.ClientSession() as http, http.get(bridge.url + "/readyz") as r:
                return r.status == 503

        await wait_until(readyz_answers, 30, 0.1, message="bridge /readyz", ignore=(aiohttp.ClientError,))
        await serve.start()
        rc, lines = await asyncio.to_thread(_exit, bridge)
        assert rc == 2
        line = _one_line(lines, "OpenCode 2.0.17")
        assert line == (f"opencode-bridge: configuration error: the upstream at {serve.url} turned out to be "
                        "OpenCode 2.0.17 (2.x, from GET /api/info) while the 1.x driver runs: restart the bridge "
                        "to drive it")
        assert any('"event": "upstream_refused"' in raw for raw in lines)
    finally:
        bridge.stop()
        await serve.stop()


async def test_a_1x_serve_runs_the_1x_driver_and_readyz_says_so(tmp_path: Path, database_url: str,
                                                                fake: FakeUpstream) -> None:
    bridge = BridgeProcess(tmp_path, fake.url, database_url)
    bridge.start()
    try:
        await bridge.wait_ready()
        async with aiohttp.ClientSession() as http, http.get(bridge.url + "/readyz?verbose") as r:
            body = await r.json()
        assert r.status == 200
        assert body["checks"]["upstream_generation"] == {"ok": True, "driver": 1, "generation": 1,
                                                         "version": "1.18.33"}
        log = bridge.log_path.read_text()
        assert '"recognised": "OpenCode 1.18.33 (1.x, from GET /api/health)"' in log
    finally:
        bridge.stop()


@pytest.mark.parametrize("setting", ["2"])
async def test_generation_2_forced_on_a_1x_serve_refuses(tmp_path: Path, fake: FakeUpstream, setting: str) -> None:
    bridge = BridgeProcess(tmp_path, fake.url, NO_DATABASE, extra_env={"BRIDGE_UPSTREAM_GENERATION": setting})
    bridge.start()
    rc, lines = await asyncio.to_thread(_exit, bridge)
    assert rc == 2
    assert "but BRIDGE_UPSTREAM_GENERATION=2: set it to auto (or 1)" in _one_line(lines, "OpenCode 1.18.33")


async def test_a_2x_serve_is_mirrored_by_the_2x_driver_across_a_kill_9(tmp_path: Path, database_url: str,
                                                                        gen2: FakeGen2Serve) -> None:
    sids = [f"ses_g2daemon{k:016d}" for k in range(3)]
    for sid in sids:
        gen2.add_session(sid)
        for i in range(3):
            await gen2.append(sid, "session.text.ended", {"assistantMessageID": "m", "ordinal": i, "text": f"{i}"})
    engine = make_engine(database_url, pool_size=1, max_overflow=0)

    async def mirrored() -> bool:
        async with engine.connect() as conn:
            rows = (await conn.execute(text("select session_id, seq, event_id from chat_session_events "
                                            "order by session_id, seq"))).all()
        want = [(sid, e["durable"]["seq"], e["id"]) for sid in sids for e in gen2.sessions[sid].events]
        return [tuple(r) for r in rows] == want

    env = {"BRIDGE_UPSTREAM_PASSWORD": "pw"}
    first = BridgeProcess(tmp_path, gen2.url, database_url, extra_env=env)
    first.start()
    try:
        await first.wait_ready()
        await wait_until(mirrored, 30, 0.1, message="2.x sessions mirrored")
        async with aiohttp.ClientSession() as http, http.get(first.url + "/readyz?verbose") as r:
            checks = (await r.json())["checks"]
        assert checks["upstream_generation"] == {"ok": True, "driver": 2, "generation": 2, "version": "2.0.17"}
        assert checks["upstream_live"]["ok"]
        await gen2.append(sids[0], "session.text.ended", {"assistantMessageID": "m", "ordinal": 9, "text": "live"})
        await wait_until(mirrored, 30, 0.1, message="a live append mirrored")
        assert first.kill() != 0  # kill -9
        gen2.drop_connections()
        for sid in sids:  # written while no bridge runs, one with a seq gap
            await gen2.append(sid, "session.text.ended", {"assistantMessageID": "m", "ordinal": 7, "text": "x"})
        await gen2.append(sids[1], "session.text.ended", {"assistantMessageID": "m", "ordinal": 8, "text": "y"},
                          seq=40)
        second = BridgeProcess(tmp_path, gen2.url, database_url, name="bridge2", extra_env=env)
        second.start()
        try:
            await second.wait_ready()
            await wait_until(mirrored, 40, 0.1, message="mirrored exactly once after the kill")
            assert "upstream_driver_unverified" in second.log_path.read_text()
        finally:
            second.stop()
    finally:
        first.stop()
        await engine.dispose()


async def test_commands_through_the_daemon_reach_a_2x_serve_exactly_once(tmp_path: Path, database_url: str,
                                                                         gen2: FakeGen2Serve) -> None:
    secret = "gen2-commands-secret-" + "x" * 40
    sid = "ses_g2command000000000000001"
    gen2.add_session(sid, "/srv/agent/proj")
    bridge = BridgeProcess(tmp_path, gen2.url, database_url, extra_env={
        "BRIDGE_UPSTREAM_PASSWORD": "pw", "BRIDGE_AUTH_SECRET": secret, "BRIDGE_UPSTREAM_NAME": "gen2-cmd",
        "BRIDGE_ALLOWED_DIRECTORIES": "/srv/agent"})
    bridge.start()
    engine = make_engine(database_url, pool_size=1, max_overflow=0)
    try:
        await bridge.wait_ready()

        async def warm() -> bool:
            async with engine.connect() as conn:
                return bool((await conn.execute(text("select count(*) from chat_session_events where "
                                                     "session_id = :s"), {"s": sid})).scalar())

        await wait_until(warm, 30, 0.1, message="the session mirrored")
        tok = mint_token(secret, "gen2-cmd", None, 600, "web", scope="control")
        body = {"command_id": "p-1", "text": "hello", "delivery": "queue"}
        async with aiohttp.ClientSession() as http:
            answers = []
            for _ in range(2):  # the same command twice: one prompt upstream
                async with http.post(f"{bridge.url}/v1/sessions/{sid}/prompt", json=body,
                                     headers={"Authorization": f"Bearer {tok}"}) as r:
                    answers.append((r.status, await r.json()))
            async with http.post(f"{bridge.url}/v1/sessions/{sid}/interrupt", json={"command_id": "i-1"},
                                 headers={"Authorization": f"Bearer {tok}"}) as r:
                interrupted = (r.status, await r.json())
        assert [a[0] for a in answers] == [200, 200], answers
        assert answers[0][1]["runtime"] == "v2" and answers[0][1] == answers[1][1]
        assert len(gen2.sessions[sid].inbox) == 1
        entry = next(iter(gen2.sessions[sid].inbox.values()))
        assert (entry["payload"]["text"], entry["delivery"]) == ("hello", "queue")
        assert interrupted[0] == 200, interrupted

        async def admitted_mirrored() -> bool:
            async with engine.connect() as conn:
                kinds = (await conn.execute(text("select kind from chat_session_events where session_id = :s "
                                                 "and type = 'session.input.admitted'"), {"s": sid})).all()
            return [k for (k,) in kinds] == ["prompt:admitted"]

        await wait_until(admitted_mirrored, 30, 0.1, message="the admission mirrored once, as prompt:admitted")
    finally:
        bridge.stop()
        await engine.dispose()


async def test_2x_live_deltas_reach_a_websocket_client_as_1x_deltas_do(tmp_path: Path, database_url: str,
                                                                     gen2: FakeGen2Serve) -> None:
    secret = "gen2-live-secret-" + "x" * 40
    sid = "ses_g2live00000000000000000001"
    gen2.add_session(sid, "/srv/agent/proj")
    await gen2.append(sid, "session.text.started", {"assistantMessageID": "msg_a", "ordinal": 0})
    bridge = BridgeProcess(tmp_path, gen2.url, database_url, extra_env={
        "BRIDGE_UPSTREAM_PASSWORD": "pw", "BRIDGE_AUTH_SECRET": secret, "BRIDGE_UPSTREAM_NAME": "gen2-live"})
    bridge.start()
    client = None
    try:
        await bridge.wait_ready()
        client = await WsClient.connect(bridge.url, mint_token(secret, "gen2-live", None, 600, "web"))
        await client.subscribe(sid, 0)
        started = await client.wait_for("event", session=sid)
        assert (started["kind"], started["fields"]["part_id"]) == ("text:start", "msg_a#0")

        async def delta() -> dict[str, Any] | None:
            gen2.publish_live({"id": "evt_d1", "type": "session.text.delta", "created": 1,
                               "location": {"directory": "/srv/agent/proj"},
                               "data": {"sessionID": sid, "assistantMessageID": "msg_a", "ordinal": 0,
                                        "delta": "Hel"}})
            got = client.of("delta", sid) if client is not None else []
            return got[0] if got else None

        got = await wait_until(delta, 20, 0.2, message="a 2.x delta on the WebSocket")
        assert (got["kind"], got["part_id"], got["delta"], got["assistant_message_id"]) == (
            "delta:text", "msg_a#0", "Hel", "msg_a")
    finally:
        if client is not None:
            await client.close()
        bridge.stop()


FORM = {"id": "frm_pick", "sessionID": "", "mode": "form", "title": "Pick",
        "fields": [{"key": "color", "title": "Which color?", "type": "string",
                    "options": [{"value": "r", "label": "Red"}, {"value": "g", "label": "Green"}]},
                   {"key": "tags", "type": "multiselect", "options": [{"value": "a", "label": "A"},
                                                                      {"value": "b", "label": "B"}]}]}


async def test_a_2x_form_is_shown_and_answered_as_a_question(tmp_path: Path, database_url: str,
                                                             gen2: FakeGen2Serve) -> None:
    secret = "gen2-form-secret-" + "x" * 40
    sid = "ses_g2form00000000000000000001"
    gen2.add_session(sid, "/srv/agent/proj")
    await gen2.append(sid, "session.step.started", {"assistantMessageID": "msg_a", "agent": "build",
                                                    "model": {"id": "mock-1", "providerID": "mock"}})
    bridge = BridgeProcess(tmp_path, gen2.url, database_url, extra_env={
        "BRIDGE_UPSTREAM_PASSWORD": "pw", "BRIDGE_AUTH_SECRET": secret, "BRIDGE_UPSTREAM_NAME": "gen2-form",
        "BRIDGE_ALLOWED_DIRECTORIES": "/srv/agent"})
    bridge.start()
    client = None
    try:
        await bridge.wait_ready()
        client = await WsClient.connect(bridge.url, mint_token(secret, "gen2-form", None, 600, "web"))
        await client.subscribe(sid, 0)
        await client.wait_for("event", session=sid)  # warm: its log is followed
        gen2.ask_form(sid, {**FORM, "sessionID": sid})
        asked = await client.wait_for("question", session=sid)
        assert (asked["request_id"], asked["state"]) == ("frm_pick", "asked")
        assert [q["question"] for q in asked["questions"]] == ["Which color?", "tags"]
        assert [o["label"] for o in asked["questions"][0]["options"]] == ["Red", "Green"]
        tok = mint_token(secret, "gen2-form", None, 600, "web", scope="prompt")
        async with aiohttp.ClientSession() as http, http.post(
                f"{bridge.url}/v1/sessions/{sid}/questions/frm_pick/reply",
                json={"command_id": "q-1", "answers": [["Red"], ["A", "B"]]},
                headers={"Authorization": f"Bearer {tok}"}) as r:
            answered = (r.status, await r.json())
        assert answered[0] == 200, answered
        assert gen2.form_answers == [(sid, "frm_pick", {"color": "r", "tags": ["a", "b"]})]
        settled = await client.wait_for("question", session=sid, state="answered")
        assert settled["request_id"] == "frm_pick"
    finally:
        if client is not None:
            await client.close()
        bridge.stop()


async def test_a_2x_form_asked_while_no_bridge_listened_is_shown_on_subscribe(tmp_path: Path, database_url: str,
                                                                              gen2: FakeGen2Serve) -> None:
    secret = "gen2-resync-secret-" + "x" * 40
    sid = "ses_g2resync000000000000000001"
    gen2.add_session(sid, "/srv/agent/proj")
    gen2.ask_form(sid, {**FORM, "sessionID": sid})  # its live event reaches nobody
    bridge = BridgeProcess(tmp_path, gen2.url, database_url, extra_env={
        "BRIDGE_UPSTREAM_PASSWORD": "pw", "BRIDGE_AUTH_SECRET": secret, "BRIDGE_UPSTREAM_NAME": "gen2-resync"})
    bridge.start()
    client = None
    try:
        await bridge.wait_ready()
        client = await WsClient.connect(bridge.url, mint_token(secret, "gen2-resync", None, 600, "web"))
        await client.subscribe(sid, 0)
        asked = await client.wait_for("question", session=sid, request_id="frm_pick")
        assert (asked["state"], asked["runtime"]) == ("asked", "v2")
        assert [o["label"] for o in asked["questions"][0]["options"]] == ["Red", "Green"]
        assert "permission_resync_upstream_failed" not in bridge.log_path.read_text()
    finally:
        if client is not None:
            await client.close()
        bridge.stop()
