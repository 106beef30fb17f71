"""The command rows' port contract (bridge.store.ports.commands, docs/ports.md, docs/commands.md "Exactly
once"), run on PostgreSQL and on the in-memory twin alike: one row per command id (per subject and target
session) whatever the number of claims, its upstream id changed only as allowed, completed once."""

from __future__ import annotations

from bridge.commands.model import Command, upstream_message_id, v2_prompt_message_id
from bridge.store.ports import CommandKey
from tests.support.store_ports import UPSTREAM, Backend, Event

SID = "ses_cmd"
OWNER = "host-a:1:aaaa"


def prompt(command_id: str, text: str = "hello", session_id: str = SID) -> Command:
    return Command("prompt", command_id, session_id, {"text": text})


async def test_the_first_claim_inserts_the_row_every_later_one_gets_it_back(backend: Backend) -> None:
    rows = backend.commands()
    first, new = await rows.claim(prompt("c-1"), "alice", "prompt", "msg_first", SID)
    assert new and (first.state, first.upstream_id, first.subject, first.command) == ("pending", "msg_first",
                                                                                     "alice", "prompt")
    again, new = await rows.claim(prompt("c-1", "other text"), "alice", "admin", "msg_second", SID)
    assert not new and again == first  # the first attempt's row, fingerprint and id
    assert again.fingerprint == prompt("c-1").fingerprint != prompt("c-1", "other text").fingerprint
    bob, new = await rows.claim(prompt("c-1"), "bob", "prompt", "msg_bob", SID)
    assert new and bob.subject == "bob"  # ids are per subject
    other, new = await rows.claim(prompt("c-1", session_id="ses_other"), "alice", "prompt", None, "ses_other")
    assert new and other.session_id == "ses_other"  # and per target session
    created, new = await rows.claim(Command("create_session", "c-1", None, {}), "alice", "prompt", "ses_x", None)
    assert new and created.session_id is None


async def test_only_a_pending_row_takes_another_upstream_id(backend: Backend) -> None:
    rows, cmd = backend.commands(), prompt("c-1")
    row, _ = await rows.claim(cmd, "alice", "prompt", "msg_a", SID)
    moved = await rows.use_upstream_id(cmd, "alice", row, "msg_b")
    assert moved.upstream_id == "msg_b"
    assert (await backend.command(CommandKey.of(cmd, "alice")) or {})["upstream_id"] == "msg_b"
    await rows.complete(CommandKey.of(cmd, "alice"), state="done", http_status=200, result={"ok": True})
    await rows.use_upstream_id(cmd, "alice", moved, "msg_c")
    assert (await backend.command(CommandKey.of(cmd, "alice")) or {})["upstream_id"] == "msg_b"


async def test_replacing_the_upstream_id_needs_the_old_one_so_two_racers_agree(backend: Backend) -> None:
    rows, cmd = backend.commands(), prompt("c-1")
    key = CommandKey.of(cmd, "alice")
    pure = v2_prompt_message_id(UPSTREAM, SID, "c-1", "alice")
    await rows.claim(cmd, "alice", "prompt", pure, SID)
    first = upstream_message_id(UPSTREAM, SID, "c-1", 1_000, "alice")
    second = upstream_message_id(UPSTREAM, SID, "c-1", 2_000, "alice")
    assert await rows.replace_upstream_id(key, pure, first) == first
    assert await rows.replace_upstream_id(key, pure, second) == first  # the later racer gets the first one's
    assert await rows.replace_upstream_id(CommandKey("alice", SID, "c-none"), pure, second) == second


async def test_a_row_completes_once_from_pending_or_sending(backend: Backend) -> None:
    rows, cmd = backend.commands(), prompt("c-1")
    key = CommandKey.of(cmd, "alice")
    await rows.claim(cmd, "alice", "prompt", None, SID)
    await rows.complete(key, state="done", http_status=200, result={"n": 1}, upstream_status=204, admitted_seq=9)
    await rows.complete(key, state="failed", http_status=502, result={"n": 2})
    stored = await backend.command(key)
    assert stored is not None
    assert (stored["state"], stored["http_status"], stored["result"], stored["upstream_status"],
            stored["admitted_seq"]) == ("done", 200, {"n": 1}, 204, 9)
    sending = prompt("c-2")
    await rows.claim(sending, "alice", "prompt", None, SID)
    assert await backend.queue().move(CommandKey.of(sending, "alice"), ("pending",), "sending")
    await rows.complete(CommandKey.of(sending, "alice"), state="failed", http_status=502, result={})
    assert (await backend.command(CommandKey.of(sending, "alice")) or {})["state"] == "failed"


async def test_the_sessions_commands_are_listed_newest_first(backend: Backend) -> None:
    rows = backend.commands()
    for cid in ("c-1", "c-2", "c-3"):
        await rows.claim(prompt(cid), "alice", "prompt", None, SID)
    await rows.claim(prompt("c-x", session_id="ses_other"), "alice", "prompt", None, "ses_other")
    listed = await rows.for_session(SID)
    assert [r["command_id"] for r in listed] == ["c-3", "c-2", "c-1"]
    assert (listed[0]["subject"], listed[0]["scope"], listed[0]["body"], listed[0]["state"]) == (
        "alice", "prompt", {"text": "hello"}, "pending")
    assert [r["command_id"] for r in await rows.for_session(SID, limit=1)] == ["c-3"]


async def test_what_the_mirror_knows_of_a_session_and_a_permission(backend: Backend) -> None:
    rows = backend.commands()
    assert await rows.session(SID) is None
    await backend.leases().claim(SID, OWNER, "/srv/agent")
    known = await rows.session(SID)
    assert known is not None and (known.directory, known.deleted) == ("/srv/agent", False)
    await backend.leases().mark_deleted(SID)
    gone = await rows.session(SID)
    assert gone is not None and gone.deleted
    assert await rows.permission_reply("per_1") is None
    await backend.permission(SID, "per_1")
    assert await rows.permission_reply("per_1") == (SID, None)
    await backend.permission(SID, "per_2", reply="once")
    assert await rows.permission_reply("per_2") == (SID, "once")


async def test_an_earlier_attempts_message_is_found_by_the_commands_digest(backend: Backend) -> None:
    rows = backend.commands()
    derived = upstream_message_id(UPSTREAM, SID, "c-1", 5_000, "alice")
    earlier = upstream_message_id(UPSTREAM, SID, "c-1", 1_000, "alice")
    unrelated = upstream_message_id(UPSTREAM, SID, "c-2", 500, "alice")
    assert await rows.earlier_message_id(SID, derived) is None
    epoch, _ = await backend.leases().claim(SID, OWNER)
    await backend.store_events(SID, epoch, [
        Event(1, "prompt:admitted", "session.next.prompt.admitted", unrelated),
        Event(2, "prompt:admitted", "session.next.prompt.admitted", derived),  # itself: not an earlier one
        Event(3, "prompt:admitted", "session.next.prompt.admitted", earlier)])
    assert await rows.earlier_message_id(SID, derived) == earlier
    assert await rows.earlier_message_id(SID, earlier) == derived
