"""The session tree over `/v1/ws` on a real PostgreSQL (docs/websocket.md, `sessions` and `subscribed`): a
page nests subagents without the audit API. Every `sessions` entry and every `subscribed` carries the
session's `parent_id` (from its stored seq 0, docs/upstream.md §20) and title; `{"op":"sessions","parent":P}`
lists P's children, also to a token limited to P (its descendants are granted with it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bridge.auth import Claims
from bridge.store.chat_sessions import LeaseStore, tree
from bridge.store.db import make_engine
from tests.support.chat_events import chat_event
from tests.support.fanout_client import WsClient
from tests.support.fanout_node import UPSTREAM, Node

PARENT = "ses_tree_parent"
CHILDREN = ["ses_tree_child_a", "ses_tree_child_b"]
GRANDCHILD = "ses_tree_grandchild"
STRANGER = "ses_tree_stranger"


def created(sid: str, parent: str | None, title: str) -> Any:
    info: dict[str, Any] = {"id": sid, "title": title, **({"parentID": parent} if parent else {})}
    return chat_event(0, session_id=sid, type_="session.created", kind="session:created", data={"info": info})


@pytest.fixture
async def node(database_url: str) -> AsyncIterator[Node]:
    engine = make_engine(database_url)
    n = Node(engine, database_url)

    async def widen(claims: Claims, sid: str) -> Claims:  # as the daemon wires it (bridge.store.chat_sessions.tree)
        return await tree.widen(claims, engine, UPSTREAM, sid)

    n.service.widen = widen
    await n.start()
    for sid, parent in [(PARENT, None), (CHILDREN[0], PARENT), (CHILDREN[1], PARENT),
                        (GRANDCHILD, CHILDREN[0]), (STRANGER, None)]:
        await n.write(sid, [created(sid, parent, f"title of {sid}")])
        await n.write_seqs(sid, 1)
        await LeaseStore(engine, UPSTREAM).set_title(sid, f"title of {sid}")  # as the follower does
    try:
        yield n
    finally:
        await n.stop()
        await engine.dispose()


async def ask(c: WsClient, ref: int, **op: Any) -> dict[str, Any]:
    await c.send(op="sessions", id=ref, **op)
    return await c.wait_for("sessions", id=ref)


async def test_sessions_and_subscribed_carry_the_parent_and_list_the_children(node: Node) -> None:
    everyone = await WsClient.connect(node.url, node.token())
    parent_only = await WsClient.connect(node.url, node.token([PARENT]))
    try:
        listed = {s["session"]: s for s in (await ask(everyone, 1))["sessions"]}
        assert {sid: s["parent_id"] for sid, s in listed.items()} == {
            PARENT: None, CHILDREN[0]: PARENT, CHILDREN[1]: PARENT, GRANDCHILD: CHILDREN[0], STRANGER: None}
        assert listed[CHILDREN[1]]["title"] == f"title of {CHILDREN[1]}"

        kids = (await ask(everyone, 2, parent=PARENT))["sessions"]
        assert sorted(s["session"] for s in kids) == CHILDREN  # children only, not the grandchild
        assert {s["parent_id"] for s in kids} == {PARENT}
        # A token limited to the parent lists it, its children and their children, and nothing else.
        assert [s["session"] for s in (await ask(parent_only, 3))["sessions"]] == [PARENT]
        assert sorted(s["session"] for s in (await ask(parent_only, 4, parent=PARENT))["sessions"]) == CHILDREN
        assert [s["session"] for s in (await ask(parent_only, 5, parent=CHILDREN[0]))["sessions"]] == [GRANDCHILD]
        await parent_only.send(op="sessions", id=6, parent=STRANGER)
        assert (await parent_only.wait_for("error", id=6))["code"] == "forbidden"

        await parent_only.subscribe(GRANDCHILD)  # granted through its ancestors
        sub = await parent_only.wait_for("subscribed", session=GRANDCHILD)
        assert (sub["parent_id"], sub["title"], sub["head"]) == (CHILDREN[0], f"title of {GRANDCHILD}", 1)
        await everyone.subscribe(PARENT)
        top = await everyone.wait_for("subscribed", session=PARENT)
        assert (top["parent_id"], top["title"]) == (None, f"title of {PARENT}")
    finally:
        await everyone.close()
        await parent_only.close()
