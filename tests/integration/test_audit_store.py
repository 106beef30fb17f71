"""Hash chain written by write_batch, `verify`/`export` round trip, tampering, views and the /v1 API,
on real PostgreSQL with the captured real tool turn as input."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.audit import cli
from bridge.audit.transcript import build_transcript
from bridge.auth import mint_token
from bridge.events import normalize, parse_frame
from bridge.http.audit import AuditContext, add_audit_routes
from bridge.store.hash_chain import verify_chain
from bridge.store.reads import AuditReader
from bridge.store.writes import EventStore
from tests.support.chat_events import RECEIVED_AT

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"
SECRET = "s" * 40


def captured(scenario: str) -> list[Any]:
    lines = (CAPTURES / scenario / "durable.sse").read_text().splitlines()
    return [normalize(parse_frame(line[6:])) for line in lines if line.startswith("data: ")]


async def mirror(store: EventStore, scenario: str, batch: int = 4) -> str:
    events = captured(scenario)
    sid = events[0].envelope.session_id
    assert sid is not None
    epoch, _ = await store.claim(sid, "owner-1", "/work/dir")
    for i in range(0, len(events), batch):  # several batches: the chain continues across them
        await store.write_batch(sid, epoch, events[i : i + batch], RECEIVED_AT)
    return sid


@pytest.fixture
def reader(engine: AsyncEngine, store: EventStore) -> AuditReader:
    return AuditReader(engine, store.upstream)


async def run_cli(reader: AuditReader, engine_url: str | None, *argv: str) -> tuple[int, str, str]:
    """Runs a CLI twin on its own event loop and engine (as the real CLI does)."""
    import asyncio

    from bridge.store.db import make_engine

    parser = argparse.ArgumentParser()
    cli.add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()

    async def factory() -> tuple[AuditReader, Callable[[], Awaitable[None]]]:
        assert engine_url is not None
        engine = make_engine(engine_url, pool_size=1)
        return AuditReader(engine, reader.upstream), engine.dispose

    rc = await asyncio.to_thread(cli.run, args, factory, out, err)
    return rc, out.getvalue(), err.getvalue()


async def test_every_stored_event_is_chained_across_batches_and_verifies(
    store: EventStore, reader: AuditReader
) -> None:
    sid = await mirror(store, "b-tool-turn")
    rows = await reader.chain_rows(sid)
    assert len(rows) == 30 and all(r.chain_hash for r in rows)
    report = verify_chain(rows)
    assert report.ok and report.head == rows[-1].chain_hash


async def test_duplicates_do_not_extend_the_chain(store: EventStore, reader: AuditReader) -> None:
    sid = await mirror(store, "a-text-turn")
    before = await reader.chain_rows(sid)
    epoch, _ = await store.claim(sid, "owner-1")
    await store.write_batch(sid, epoch, captured("a-text-turn"), RECEIVED_AT)  # all duplicates
    assert await reader.chain_rows(sid) == before


async def test_export_then_verify_round_trip_and_tampered_file_is_detected(
    store: EventStore, reader: AuditReader, database_url: str, tmp_path: Path
) -> None:
    sid = await mirror(store, "b-tool-turn")
    out = tmp_path / "s.jsonl"
    rc, _, _ = await run_cli(reader, database_url, "export", sid, "-o", str(out), "--progress")
    assert rc == 0
    lines = out.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "opencode-bridge-export/1"
    assert json.loads(lines[-1]) == {"end": True, "events": 30, "head": (await reader.chain_rows(sid))[-1].chain_hash}

    rc, text_out, _ = await run_cli(reader, database_url, "verify", "--file", str(out))
    assert rc == 0 and "ok, 30 events" in text_out

    # The exported events rebuild the same transcript as the database.
    exported = [json.loads(line) for line in lines[1:-1]]
    db_rows = [r async for r in reader.all_events(sid)]
    assert build_transcript(exported) == build_transcript(db_rows)

    # Edit one tool output in the file, keeping it valid JSON: the chain breaks exactly there.
    tampered = [json.loads(line) for line in lines]
    victim = next(e for e in tampered[1:-1] if e["kind"] == "tool:success")
    victim["payload"]["data"]["content"][0]["text"] = "rm -rf /\n"
    victim["payload_text"] = json.dumps(victim["payload"])
    out.write_text("".join(json.dumps(e) + "\n" for e in tampered))
    rc, text_out, _ = await run_cli(reader, database_url, "verify", "--file", str(out))
    assert rc == 1 and f"BROKEN at seq {victim['seq']}" in text_out

    out.write_text("".join(line + "\n" for line in lines[:-3]))  # truncated: no trailer
    rc, text_out, _ = await run_cli(reader, database_url, "verify", "--file", str(out))
    assert rc == 1 and "truncated" in text_out


async def test_tampering_in_the_database_is_reported_at_the_first_broken_link(
    store: EventStore, reader: AuditReader, engine: AsyncEngine, database_url: str
) -> None:
    sid = await mirror(store, "b-tool-turn")
    rc, out, _ = await run_cli(reader, database_url, "verify")
    assert rc == 0 and f"{sid}: ok, 30 events" in out
    async with engine.begin() as conn:
        await conn.execute(text(
            "UPDATE chat_session_events SET payload = jsonb_set(payload, '{data,input,command}', '\"true\"') "
            "WHERE session_id = :s AND kind = 'tool:start' AND tool_name = 'bash'"), {"s": sid})
        seq = (await conn.execute(text("SELECT seq FROM chat_session_events WHERE session_id = :s AND "
                                       "kind = 'tool:start' AND tool_name = 'bash'"), {"s": sid})).scalar_one()
    rc, out, _ = await run_cli(reader, database_url, "verify", sid)
    assert rc == 1 and f"BROKEN at seq {seq}" in out

    async with engine.begin() as conn:  # removing a row breaks the link after it
        await conn.execute(text("DELETE FROM chat_session_events WHERE session_id = :s AND seq <= :q"),
                           {"s": sid, "q": seq})
    report = verify_chain(await reader.chain_rows(sid))
    assert report.broken is not None and report.broken.seq == seq + 1


async def test_tool_calls_view_has_every_call_with_input_and_outcome(
    store: EventStore, reader: AuditReader, engine: AsyncEngine
) -> None:
    sid = await mirror(store, "b-tool-turn")
    async with engine.connect() as conn:
        rows = (await conn.execute(text(
            "SELECT tool, input, outcome, output_text, error_message FROM audit_tool_calls "
            "WHERE session_id = :s ORDER BY called_seq"), {"s": sid})).all()
        prompts = (await conn.execute(text("SELECT text, delivery, started_seq FROM audit_prompts "
                                           "WHERE session_id = :s ORDER BY admitted_seq"), {"s": sid})).all()
    assert [(r.tool, r.outcome) for r in rows] == [("bash", "success"), ("read", "success"), ("read", "failed")]
    assert rows[0].input == {"command": "echo hi", "description": "Print hi"}
    assert rows[0].output_text.startswith("hi\n")
    assert rows[1].output_text == "hello from proj\n"
    assert rows[2].error_message
    assert all(p.started_seq is not None for p in prompts) and prompts[0].delivery == "steer"


@pytest.fixture
async def api(engine: AsyncEngine, store: EventStore) -> AsyncIterator[TestClient[Any, Any]]:
    app = web.Application()
    add_audit_routes(app, AuditContext(AuditReader(engine, store.upstream), SECRET))
    client: TestClient[Any, Any] = TestClient(TestServer(app))
    await client.start_server()
    try:
        yield client
    finally:
        await client.close()


def bearer(upstream: str, sessions: list[str] | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {mint_token(SECRET, upstream, sessions, 600)}"}


async def test_api_needs_a_token_and_respects_its_session_scope(
    api: TestClient[Any, Any], store: EventStore
) -> None:
    sid = await mirror(store, "a-text-turn")
    other = await mirror(store, "b-tool-turn")
    assert (await api.get("/v1/sessions")).status == 401
    assert (await api.get("/v1/sessions", headers={"Authorization": "Bearer nope"})).status == 401
    mine = bearer(store.upstream, [sid])
    r = await api.get("/v1/sessions", headers=mine)
    assert r.status == 200 and [s["session_id"] for s in (await r.json())["data"]] == [sid]
    assert (await api.get(f"/v1/sessions/{other}/events", headers=mine)).status == 403
    assert (await api.get("/v1/audit/tool-calls", params={"session": other}, headers=mine)).status == 403
    r = await api.get("/v1/audit/tool-calls", headers=mine)
    assert (await r.json())["data"] == []  # the other session's calls are not visible
    assert (await api.get("/v1/sessions", headers=bearer("another-upstream"))).status == 401
    r = await api.get("/v1/openapi.json")
    assert r.status == 200 and "/v1/audit/tool-calls" in (await r.json())["paths"]


async def test_api_pages_events_by_seq_and_serves_transcript_and_tool_calls(
    api: TestClient[Any, Any], store: EventStore
) -> None:
    sid = await mirror(store, "b-tool-turn")
    auth = bearer(store.upstream)
    seqs: list[int] = []
    after = 0
    while True:
        r = await api.get(f"/v1/sessions/{sid}/events", params={"after": after, "limit": 7}, headers=auth)
        body = await r.json()
        seqs += [e["seq"] for e in body["data"]]
        if body["next_after"] is None:
            break
        after = body["next_after"]
    assert seqs == list(range(1, 31))
    r = await api.get(f"/v1/sessions/{sid}/transcript", headers=auth)
    entries = (await r.json())["data"]["entries"]
    assert entries[0]["type"] == "user" and entries[1]["parts"][0]["tool"] == "bash"
    r = await api.get("/v1/audit/tool-calls", params={"tool": "read"}, headers=auth)
    calls = (await r.json())["data"]
    assert [c["outcome"] for c in calls] == ["success", "failed"]
    for bad in ({"limit": "0"}, {"since": "yesterday"}, {"after": "x"}, {"tool": "\x00"}):
        r = await api.get("/v1/audit/tool-calls", params=bad, headers=auth)
        assert r.status == 400, bad
    assert (await api.get("/v1/sessions/ses_missing", headers=auth)).status == 404


async def test_chain_computed_by_postgresql_matches_the_python_verifier_on_unicode_and_escapes(
    store: EventStore, reader: AuditReader
) -> None:
    from tests.support.chat_events import chat_event

    sid = "ses_unicode"
    epoch, _ = await store.claim(sid, "owner-1")
    odd = ["héllo ✓ 🙂", 'quote " and \\ backslash', "line\nbreak\ttab", "\u2028\u00a0", "ok"]
    events = [chat_event(i + 1, session_id=sid, data={"text": t, "n": [1.5, 10**20, None]})
              for i, t in enumerate(odd)]
    await store.write_batch(sid, epoch, events[:2], RECEIVED_AT)
    await store.write_batch(sid, epoch, events[2:], RECEIVED_AT)
    report = verify_chain(await reader.chain_rows(sid))
    assert report.ok and report.events == 5


async def test_cli_twins_list_sessions_page_events_and_refuse_unknown_sessions(
    store: EventStore, reader: AuditReader, database_url: str
) -> None:
    sid = await mirror(store, "b-tool-turn")
    rc, out, _ = await run_cli(reader, database_url, "sessions")
    assert rc == 0 and out.startswith(sid) and "seq=30" in out
    rc, out, _ = await run_cli(reader, database_url, "sessions", "--json", "--status", "nope")
    assert rc == 0 and out == ""
    rc, out, _ = await run_cli(reader, database_url, "events", sid, "--after", "27")
    assert rc == 0 and [json.loads(line)["seq"] for line in out.splitlines()] == [28, 29, 30]
    rc, _, err = await run_cli(reader, database_url, "transcript", "ses_unknown")
    assert rc == 1 and "no session 'ses_unknown'" in err
