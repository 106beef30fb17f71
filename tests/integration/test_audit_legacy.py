"""Transcripts and the tool-call audit of legacy-driven turns (docs/legacy.md, docs/audit.md), on real
PostgreSQL: the legacy captures' events stored through `EventStore.write_batch` as the ingest stores them
(sync-log items, mapped by `normalize_legacy`) give the turns the capture's legacy message store holds, in
the same shape as a v2 turn, and a session mixing both runtimes gives one transcript in seq order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.audit.render import render_transcript
from bridge.audit.transcript import TranscriptBuilder, build_transcript
from bridge.events import ChatEvent
from bridge.store.reads import AuditReader, ToolCallFilter
from bridge.store.writes import EventStore
from tests.support.chat_events import RECEIVED_AT
from tests.support.legacy_rows import STORES, legacy_session, message_store, x9_sync_log

from .test_audit_store import run_cli


async def store_events(store: EventStore, session_id: str, events: list[ChatEvent], batch: int = 5) -> None:
    durable = [e for e in events if e.seq is not None]
    epoch, _ = await store.claim(session_id, "owner-1", "/work/dir")
    for i in range(0, len(durable), batch):
        await store.write_batch(session_id, epoch, durable[i : i + batch], RECEIVED_AT)


async def transcript(reader: AuditReader, session_id: str) -> list[dict[str, Any]]:
    b = TranscriptBuilder()
    async for row in reader.transcript_rows(session_id, 0, 10_000):
        b.add(row)
    return b.entries


def expected_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The legacy message store as transcript entries would say it."""
    out: list[dict[str, Any]] = []
    for m in messages:
        info, parts = m["info"], m["parts"]
        if info["role"] == "user":
            out.extend({"type": "user", "text": p["text"]} for p in parts if p["type"] == "text")
            continue
        step: dict[str, Any] = {"type": "assistant", "parts": [], "finish": None, "tokens": None, "cost": None,
                                "error": None}
        for p in parts:
            if p["type"] in ("text", "reasoning"):
                step["parts"].append((p["type"], p["text"]))
            elif p["type"] == "tool":
                s = p["state"]
                status = {"completed": "success", "error": "failed"}[s["status"]]
                step["parts"].append(("tool", p["callID"], p["tool"], status, s["input"], s.get("output"),
                                      s.get("error"), s["time"]["end"] - s["time"]["start"]))
            elif p["type"] == "patch":  # files changed by the step (docs/upstream.md §20)
                step["parts"].append(("patch", [Path(f).name for f in p["files"]]))
            elif p["type"] == "step-finish":
                t = p["tokens"]
                step.update(finish=p["reason"], cost=p["cost"], tokens={
                    "input": t["input"], "output": t["output"], "reasoning": t["reasoning"], "cache": t["cache"]})
        if "error" in info:
            step.update(finish="error", error={"type": info["error"]["name"],
                                               "message": info["error"]["data"]["message"]})
        out.append(step)
    return out


def comparable(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in entries:
        if e["type"] == "user":
            out.append({"type": "user", "text": e["text"]})
            continue
        parts: list[tuple[Any, ...]] = []
        for p in e["parts"]:
            if p["type"] == "tool":
                error = p["error"]["message"] if p["error"] else None
                parts.append(("tool", p["call_id"], p["tool"], p["status"], p["input"], p["output_text"], error,
                              p["duration_ms"]))
            elif p["type"] == "patch":
                parts.append(("patch", [Path(f).name for f in p["files"]]))
            else:
                parts.append((p["type"], p["text"]))
        out.append({"type": "assistant", "parts": parts, "finish": e["finish"], "tokens": e["tokens"],
                    "cost": e["cost"], "error": e["error"]})
    return out


@pytest.mark.parametrize("name", sorted(STORES))
async def test_a_stored_legacy_session_gives_the_turns_of_the_legacy_message_store(
    name: str, engine: AsyncEngine, store: EventStore
) -> None:
    session_id, events = legacy_session(name)
    await store_events(store, session_id, events)
    entries = await transcript(AuditReader(engine, store.upstream), session_id)
    _, messages = message_store(name)
    legacy = [e for e in entries if e["seq"] <= max(ev.seq or 0 for ev in events)]
    expected = expected_turns(messages)
    # Users and steps each in order (x8 adds a second prompt part to the first user message later on).
    for role in ("user", "assistant"):
        assert [e for e in comparable(legacy) if e["type"] == role] == [e for e in expected if e["type"] == role]
    first = entries[0]
    assert first["type"] == "user" and first["started_seq"] is not None  # taken: a step started for it
    for e in entries:
        if e["type"] == "assistant":
            assert e["complete"] and e["agent"] == "build" and e["model"] == {"provider": "mock", "id": "mock-1"}


async def test_re_sent_updates_add_nothing_to_the_transcript(engine: AsyncEngine, store: EventStore) -> None:
    session_id, events = legacy_session("x1-legacy-tool-turn")
    stored = [e for e in events if e.seq is not None]
    assert sum(e.kind.startswith("legacy:") for e in stored) >= 20  # many re-sends
    await store_events(store, session_id, events)
    entries = await transcript(AuditReader(engine, store.upstream), session_id)
    texts = [p["text"] for e in entries if e["type"] == "assistant" for p in e["parts"] if p["type"] == "text"]
    assert texts == ["Done: the tool returned its output."] * 2
    assert [e["type"] for e in entries].count("assistant") == 5
    rendered = render_transcript(entries)
    assert "tool bash [success]" in rendered and "finish=stop tokens in=100 out=10" in rendered
    assert "not taken yet" not in rendered and "USER (taken)" in rendered


async def test_a_session_mixing_a_legacy_and_a_v2_turn_is_one_transcript_in_seq_order(
    engine: AsyncEngine, store: EventStore
) -> None:
    session_id, events = x9_sync_log()
    assert {e.runtime for e in events} == {"legacy", "v2"}
    await store_events(store, session_id, events, batch=7)
    entries = await transcript(AuditReader(engine, store.upstream), session_id)
    seqs = [e["seq"] for e in entries]
    assert seqs == sorted(seqs)
    assert [e["type"] for e in entries] == ["user", "assistant", "assistant", "assistant", "user", "assistant"]
    legacy_prompt, v2_prompt = entries[0], entries[4]
    assert legacy_prompt["text"].startswith("MOCK:tool") and v2_prompt["text"].startswith("MOCK:text")
    assert legacy_prompt["started_seq"] is not None and v2_prompt["started_seq"] is not None
    tools = [p for e in entries if e["type"] == "assistant" for p in e["parts"] if p["type"] == "tool"]
    assert [(t["tool"], t["status"]) for t in tools] == [("bash", "success"), ("read", "failed")]
    assert tools[0]["input"] == {"command": "echo hi", "description": "Print hi"} and tools[0]["output_text"] == "hi\n"
    assert tools[1]["error"]["type"] is None and "invalid arguments" in tools[1]["error"]["message"]
    finals = [p["text"] for e in entries if e["type"] == "assistant" for p in e["parts"] if p["type"] == "text"]
    assert finals == ["Done: the tool returned its output.", "Hello from the mock server."]
    assert [e["finish"] for e in entries if e["type"] == "assistant"] == ["tool-calls", "tool-calls", "stop", "stop"]
    assert all(e["tokens"]["input"] == 100 for e in entries if e["type"] == "assistant")


async def test_the_tool_call_audit_lists_legacy_calls_like_v2_calls(engine: AsyncEngine, store: EventStore) -> None:
    session_id, events = legacy_session("x1-legacy-tool-turn")
    await store_events(store, session_id, events)
    calls = await AuditReader(engine, store.upstream).tool_calls(ToolCallFilter(session=session_id))
    _, messages = message_store("x1-legacy-tool-turn")
    parts = [p for m in messages for p in m["parts"] if p["type"] == "tool"]
    assert [c["call_id"] for c in calls] == [p["callID"] for p in parts]
    for c, p in zip(calls, parts, strict=True):
        s = p["state"]
        assert (c["tool"], c["input"]) == (p["tool"], s["input"])
        assert c["outcome"] == {"completed": "success", "error": "failed"}[s["status"]]
        assert c["output_text"] == s.get("output")
        assert (c["error_type"], c["error_message"]) == (None, s.get("error"))
        assert c["finished_seq"] > c["called_seq"] and c["duration_ms"] == s["time"]["end"] - s["time"]["start"]


async def test_export_and_verify_cover_a_session_of_both_runtimes(
    engine: AsyncEngine, store: EventStore, database_url: str, tmp_path: Path
) -> None:
    session_id, events = x9_sync_log()
    await store_events(store, session_id, events)
    reader = AuditReader(engine, store.upstream)
    rc, out, _ = await run_cli(reader, database_url, "verify", session_id)
    assert rc == 0 and f"{session_id}: ok, {len(events)} events" in out
    path = tmp_path / "mixed.jsonl"
    rc, _, _ = await run_cli(reader, database_url, "export", session_id, "-o", str(path))
    assert rc == 0
    lines = path.read_text().splitlines()
    rc, out, _ = await run_cli(reader, database_url, "verify", "--file", str(path))
    assert rc == 0 and f"ok, {len(events)} events" in out
    exported = [json.loads(line) for line in lines[1:-1]]
    assert {e["type"] for e in exported} >= {"message.part.updated", "session.next.text.ended"}
    assert build_transcript(exported) == await transcript(reader, session_id)  # the file alone rebuilds it
    rc, out, _ = await run_cli(reader, database_url, "transcript", session_id)
    assert rc == 0 and out.count("USER (") == 2 and "tool bash [success]" in out and "tool read [failed]" in out
    assert out.index("Done: the tool returned its output.") < out.index("Hello from the mock server.")

    # A legacy tool output edited in the file (valid JSON) breaks the chain exactly there.
    tampered = [json.loads(line) for line in lines]
    victim = next(e for e in tampered[1:-1] if e["kind"] == "tool:success")
    victim["payload"]["data"]["part"]["state"]["output"] = "rm -rf /\n"
    victim["payload_text"] = json.dumps(victim["payload"])
    path.write_text("".join(json.dumps(e) + "\n" for e in tampered))
    rc, out, _ = await run_cli(reader, database_url, "verify", "--file", str(path))
    assert rc == 1 and f"BROKEN at seq {victim['seq']}" in out


async def test_the_sql_views_list_both_runtimes_alike(engine: AsyncEngine, store: EventStore) -> None:
    session_id, events = x9_sync_log()
    await store_events(store, session_id, events)
    q = {"s": session_id}
    async with engine.connect() as conn:
        prompts = (await conn.execute(text(
            "SELECT text, delivery, started_seq > admitted_seq FROM audit_prompts WHERE session_id = :s "
            "ORDER BY admitted_seq"), q)).all()
        texts = (await conn.execute(text(
            "SELECT part, text FROM audit_texts WHERE session_id = :s ORDER BY seq"), q)).all()
        steps = (await conn.execute(text(
            "SELECT finish, tokens_input, tokens_output, cost FROM audit_steps WHERE session_id = :s "
            "ORDER BY seq"), q)).all()
        conversation = (await conn.execute(text(  # the docs/audit.md example
            "SELECT e.seq, e.kind, coalesce(p.text, t.text, e.tool_name, e.error_message) AS what "
            "FROM chat_session_events e "
            "LEFT JOIN audit_prompts p ON p.upstream = e.upstream AND p.session_id = e.session_id "
            "AND p.admitted_seq = e.seq "
            "LEFT JOIN audit_texts t ON t.upstream = e.upstream AND t.session_id = e.session_id AND t.seq = e.seq "
            "WHERE e.session_id = :s AND e.kind NOT LIKE 'legacy:%' ORDER BY e.seq"), q)).all()
    assert [(p[0].split()[0], p[1], p[2]) for p in prompts] == [("MOCK:tool", None, True), ("MOCK:text", "steer", True)]
    assert texts == [("text", "Done: the tool returned its output."), ("text", "Hello from the mock server.")]
    assert steps == [("tool-calls", 100, 10, 0), ("tool-calls", 100, 10, 0), ("stop", 100, 10, 0),
                     ("stop", 100, 10, 0)]
    whats = [w for _, kind, w in conversation if kind in ("prompt:admitted", "text:end", "tool:start")]
    assert [w.split()[0] for w in whats] == ["MOCK:tool", "bash", "read", "Done:", "MOCK:text", "Hello"]
