"""bridge.command_service.message_ids: the upstream ids a command is sent with, derived when its row is
claimed; a legacy prompt's pure v2 id is swapped once for a time-stamped one with the same digest."""

from __future__ import annotations

from bridge.command_service.message_ids import MessageIds
from bridge.commands.model import parse_command, upstream_message_id, v2_prompt_message_id
from tests.support.commands_twin import SID
from tests.support.door_twins import UPSTREAM, DoorStoreTwin

NOW_MS = 1_765_000_000_000


def test_each_command_gets_its_kind_of_id_and_two_subjects_never_share_one() -> None:
    ids = MessageIds(DoorStoreTwin(), lambda: NOW_MS)  # type: ignore[arg-type]
    prompt = parse_command("prompt", {"command_id": "c1", "text": "hi", "delivery": "steer"}, SID)
    assert ids.derive(prompt, "alice") == v2_prompt_message_id(UPSTREAM, SID, "c1", "alice")
    assert ids.derive(prompt, "alice") != ids.derive(prompt, "bob")
    create = parse_command("create_session", {"command_id": "c2", "directory": "/srv/a"})
    assert str(ids.derive(create, "alice")).startswith("ses_")
    slash = parse_command("slash_command", {"command_id": "c3", "command": "review"}, SID)
    assert ids.derive(slash, "alice") == upstream_message_id(UPSTREAM, SID, "c3", NOW_MS, "alice")
    assert ids.derive(parse_command("interrupt", {"command_id": "c4"}, SID), "alice") is None


async def test_a_legacy_prompt_takes_a_time_stamped_id_once() -> None:
    store = DoorStoreTwin()
    now = [NOW_MS]
    ids = MessageIds(store, lambda: now[0])  # type: ignore[arg-type]
    prompt = parse_command("prompt", {"command_id": "c1", "text": "hi", "delivery": "steer"}, SID)
    row, _ = await store.claim(prompt, "alice", "prompt", ids.derive(prompt, "alice"), SID)
    stamped = await ids.legacy_stamped(prompt, row)
    assert stamped.upstream_id == upstream_message_id(UPSTREAM, SID, "c1", NOW_MS, "alice")
    assert stamped.upstream_id is not None and row.upstream_id is not None
    assert stamped.upstream_id[-14:] == row.upstream_id[-14:]  # the same digest
    now[0] += 5_000  # a retry later: the row already holds the stamped id, it keeps it
    again, _ = await store.claim(prompt, "alice", "prompt", ids.derive(prompt, "alice"), SID)
    assert (await ids.legacy_stamped(prompt, again)).upstream_id == stamped.upstream_id
