"""Erasure (docs/lifecycle.md, "Erasure") on a real PostgreSQL: a subscribed session with subagents leaves
every table, its subscribers get the final frame, a tombstone per session keeps it out for good (claims,
live-only rows, any replica's insert), and other sessions keep every row."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.cli import _parser
from bridge.config import Settings
from bridge.errors import LeaseHeld, LeaseLost
from bridge.lifecycle import cli as lifecycle_cli
from bridge.store.chat_sessions import LeaseStore
from bridge.store.commands_pending.pending import upsert_permission_asked
from bridge.store.db import make_engine
from bridge.store.lifecycle import erase_session
from bridge.store.lifecycle.removal import SESSION_TABLES
from bridge.store.schema import chat_session_tombstones, metadata
from bridge.store.session_errors import SessionErrorStore
from tests.support.chat_events import chat_event
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import UPSTREAM, Node

PARENT = "ses_erase_parent"
CHILD = "ses_erase_child"
GRANDCHILD = "ses_erase_grandchild"
OTHER = "ses_erase_other"
ERASED = [CHILD, PARENT, GRANDCHILD]
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def created(sid: str, parent: str | None) -> Any:
    info: dict[str, Any] = {"id": sid, "title": sid, **({"parentID": parent} if parent else {})}
    return chat_event(0, session_id=sid, type_="session.created", kind="session:created", data={"info": info})


async def side_rows(engine: AsyncEngine, sid: str, *, command: bool = True) -> None:
    """One row of each live-only table, as the relay, the error recorder and the command door write them
    (the command door refuses an erased session before writing its row: test_commands_erase.py)."""
    await SessionErrorStore(engine, UPSTREAM).record(sid, f"err_{sid}", "ProviderAuthError", "no key",
                                                     {"type": "session.error"}, NOW)
    async with engine.begin() as conn:
        await conn.execute(upsert_permission_asked({"upstream": UPSTREAM, "request_id": f"per_{sid}",
                                                    "session_id": sid, "asked_at": NOW}))
        if command:
            await conn.execute(text(
                "INSERT INTO chat_commands (upstream, command_id, command, session_id, target_session, subject, "
                "scope, fingerprint, body, state) VALUES (:u, :c, 'prompt', :s, :s, 'alice', 'prompt', 'f', '{}', "
                "'done')").bindparams(u=UPSTREAM, c=f"c-{sid}", s=sid))
    await LeaseStore(engine, UPSTREAM).record_gap(sid, 5, 6)


async def per_table(engine: AsyncEngine, sids: list[str]) -> dict[str, int]:
    out = {}
    async with engine.connect() as conn:
        for table in SESSION_TABLES:
            q = text(f"SELECT count(*) FROM {table} WHERE upstream = :u AND "
                     f"({SESSION_TABLES[table].replace(':ids', ':sids')})").bindparams(u=UPSTREAM, sids=sids)
            out[table] = int((await conn.execute(q)).scalar_one())
    return out


@pytest.fixture
async def node(database_url: str) -> AsyncIterator[Node]:
    engine = make_engine(database_url)
    n = Node(engine, database_url)
    await n.start()
    for sid, parent in [(PARENT, None), (CHILD, PARENT), (GRANDCHILD, CHILD), (OTHER, None)]:
        await n.write(sid, [created(sid, parent)])
        await n.write_seqs(sid, 1, 2, 3)
        await side_rows(engine, sid)
        await n.writer.reject_frame(sid, "bad_json", "{", NOW)
    try:
        yield n
    finally:
        await n.stop()
        await engine.dispose()


def test_every_table_that_names_a_session_is_emptied_by_the_removal() -> None:
    named = {t.name for t in metadata.sorted_tables if "session_id" in t.c or "target_session" in t.c}
    assert named - {"chat_session_tombstones"} == set(SESSION_TABLES)


async def test_erase_removes_the_tree_from_every_table_and_ends_the_subscriptions(node: Node) -> None:
    engine = node.engine
    other_before = await per_table(engine, [OTHER])
    assert all(other_before.values()), other_before  # the fixture filled every table
    watcher = await WsClient.connect(node.url, node.token())
    try:
        for sid in (PARENT, CHILD, OTHER):
            await watcher.subscribe(sid)
            await watcher.wait_for("subscribed", session=sid)

        done = await erase_session(engine, UPSTREAM, PARENT, erased_by="ops", reason="the user asked")

        assert sorted(done.sessions) == sorted(ERASED) and not done.already
        assert done.rows[PARENT]["chat_session_events"] == 4 and done.rows[PARENT]["chat_sessions"] == 1
        for sid in (PARENT, CHILD):
            await watcher.wait_for("erased", session=sid)
        # The subscriptions ended: an event of the session that stays still arrives, none of the erased.
        await node.write_seqs(OTHER, 4)
        await watcher.wait_for("event", session=OTHER, seq=4)
        assert watcher.of("erased", OTHER) == []
    finally:
        await watcher.close()

    assert await per_table(engine, ERASED) == dict.fromkeys(SESSION_TABLES, 0)
    late = await WsClient.connect(node.url, node.token())
    try:  # a page opened afterwards: the same final frame, answering its subscribe, and no subscription
        await late.subscribe(GRANDCHILD, id="s1")
        assert (await late.wait_for("erased", session=GRANDCHILD))["id"] == "s1"
        await late.subscribe(OTHER, id="s2")
        await late.wait_for("subscribed", session=OTHER)
        assert late.of("subscribed", GRANDCHILD) == [] and node.hub.subscriber_count(GRANDCHILD) == 0
    finally:
        await late.close()
    other_after = await per_table(engine, [OTHER])
    assert other_after == {**other_before, "chat_session_events": other_before["chat_session_events"] + 1}
    async with engine.connect() as conn:
        stones = {r.session_id: r for r in await conn.execute(select(chat_session_tombstones))}
    assert sorted(stones) == sorted(ERASED)
    assert {r.root_session_id for r in stones.values()} == {PARENT}
    assert (stones[CHILD].erased_by, stones[CHILD].reason) == ("ops", "the user asked")
    assert stones[CHILD].rows["chat_session_events"] == 4 and stones[CHILD].rows["chat_commands"] == 1


async def test_nothing_of_an_erased_session_is_written_again(node: Node) -> None:
    engine = node.engine
    await erase_session(engine, UPSTREAM, PARENT, erased_by="ops", reason="gone")

    with pytest.raises(LeaseLost):  # the follower that held it: its next batch is fenced
        await node.write_seqs(PARENT, 4)
    with pytest.raises(LeaseHeld) as held:  # discovery, the sync log, another replica: a claim
        await node.writer.claim(CHILD, "replica-2", "/dir")
    assert held.value.verdict.value == "deleted"
    await side_rows(engine, GRANDCHILD, command=False)  # live-only rows of any process: skipped by the trigger
    await node.writer.reject_frame(PARENT, "bad_json", "{", NOW)
    await node.writer.mark_deleted(PARENT)  # `session.deleted` after an upstream delete

    assert await per_table(engine, ERASED) == dict.fromkeys(SESSION_TABLES, 0)
    again = await erase_session(engine, UPSTREAM, PARENT, erased_by="someone", reason="twice")
    assert again.already and again.total == 0
    async with engine.connect() as conn:
        count = (await conn.execute(select(func.count()).select_from(chat_session_tombstones))).scalar_one()
        reason = (await conn.execute(select(chat_session_tombstones.c.reason).where(
            chat_session_tombstones.c.session_id == PARENT))).scalar_one()
    assert (count, reason) == (3, "gone")  # the first tombstone stays


async def test_the_cli_erases_the_tree_and_prints_what_left(node: Node, database_url: str) -> None:
    args = _parser().parse_args(["erase", "--session", CHILD, "--reason", "ticket 7", "--by", "ops@example"])
    out = io.StringIO()
    code = await asyncio.to_thread(lifecycle_cli.run, args, Settings(upstream_name=UPSTREAM), database_url, out)
    said = json.loads(out.getvalue())
    assert code == 0 and said["session_id"] == CHILD and sorted(said["sessions"]) == sorted([CHILD, GRANDCHILD])
    assert said["rows_by_session"][GRANDCHILD]["chat_session_events"] == 4
    assert await per_table(node.engine, [CHILD, GRANDCHILD]) == dict.fromkeys(SESSION_TABLES, 0)
    assert (await per_table(node.engine, [PARENT]))["chat_session_events"] == 4  # the parent stays
    bad = _parser().parse_args(["erase", "--session", "not-a-session", "--reason", "x"])
    err = io.StringIO()
    assert lifecycle_cli.run(bad, Settings(upstream_name=UPSTREAM), database_url, io.StringIO(), err) == 2
