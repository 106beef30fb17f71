"""Todo lists changed while `/global/event` was down (docs/upstream.md §20: live only upstream): after every
live reconnect what the fan-out kept turns stale and is read again from `GET /session/{id}/todo`, with the
sessions pages watch, pushing only what changed; against the fake upstream and a real PostgreSQL."""

from __future__ import annotations

from typing import Any

from tests.support.waiting import wait_until

from .test_permission_resync import SID, Stack, stack  # noqa: F401  (fixture)

PLAN = [{"content": "Write tests", "status": "in_progress", "priority": "high"}]


async def pong(stack: Stack, ref: int) -> None:  # noqa: F811
    await stack.ws.send(op="ping", id=ref)
    await stack.ws.wait_for("pong", id=ref)


async def test_a_todo_list_changed_while_away_is_re_read_and_pushed_once(stack: Stack) -> None:  # noqa: F811
    kept = stack.fanout.relay.state
    # the subscriber's own re-read (an empty list upstream: no news, nothing pushed) is done first
    await wait_until(lambda: kept.get(SID, "todo") == [], 20, 0.01, message="the subscriber's re-read")
    stack.fake.todos[SID] = PLAN  # written upstream, its todo.updated never seen
    await stack.reconnect()
    msg = await stack.ws.wait_for("todo", session=SID)
    assert msg["todos"] == PLAN
    # (each of the live streams' reconnects runs a pass: the last one may still be reading)
    await wait_until(lambda: kept.get(SID, "todo") == PLAN, 20, 0.01, message="kept")

    await stack.reconnect()  # unchanged: re-read, kept, not pushed again
    await wait_until(lambda: kept.get(SID, "todo") == PLAN, 20, 0.01, message="kept again")
    await pong(stack, 1)
    assert len(stack.ws.of("todo", SID)) == 1, [(m["type"], m.get("todos")) for m in stack.ws.messages]

    stack.fake.todos[SID] = []  # cleared while away: the page is told
    await stack.reconnect()
    cleared: list[dict[str, Any]] = (await stack.ws.wait_for("todo", session=SID, todos=[]))["todos"]
    assert cleared == []
    await wait_until(lambda: kept.get(SID, "todo") == [], 20, 0.01, message="kept cleared")


async def test_a_live_todo_event_is_kept_and_relayed(stack: Stack) -> None:  # noqa: F811
    stack.fake.todos[SID] = PLAN  # what the serve answers from now on
    stack.fake.publish_live({"id": "evt_t1", "type": "todo.updated", "location": {"directory": "/"},
                             "data": {"sessionID": SID, "todos": PLAN}})
    msg = await stack.ws.wait_for("todo", session=SID)
    assert msg["todos"] == PLAN
    await wait_until(lambda: stack.fanout.relay.state.get(SID, "todo") == PLAN, 20, 0.01, message="kept")
    await pong(stack, 2)
    # (the subscriber's own re-read may push the same list again: a new page gets the current state)
    assert all(m["todos"] == PLAN for m in stack.ws.of("todo", SID))
