"""BRIDGE_WORKERS=2 (docs/operations.md "Workers"): each worker decodes only the `/global/event` frames it has a
use for. Two sessions, one at home on each worker; once each worker's claim of the other's session was refused,
a burst of every kind (v2 events: their twins; a legacy part: its bus event and twin; a delta) is dropped
undecoded exactly where it is of no use — the worker that neither holds the session nor has a subscriber of
it — and nowhere else: a WebSocket client (on whichever worker accepted it) watching both sessions gets the
deltas of both, the one held by the other worker included, and the mirror equals the upstream's logs."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from bridge.lease import home_worker
from bridge.store.writes import EventStore
from tests.integration.test_workers import metric
from tests.support.bridge_proc import BridgeProcess
from tests.support.fake_upstream import FakeUpstream
from tests.support.fanout_client import WsClient
from tests.support.stored_rows import stored_ids
from tests.support.waiting import wait_until

UPSTREAM = "fake:workers-skip"
SECRET = "workers-skip-secret-" + "x" * 40
SKIPPED = "bridge_live_frames_skipped_total"


def at_home(worker: int) -> str:
    return next(sid for i in range(1000) if home_worker(sid := f"ses_skip{i:04d}", 2) == worker)


async def text_ended(fake: FakeUpstream, sid: str, tag: str) -> None:
    await fake.append(sid, "session.next.text.ended", {"assistantMessageID": "msg_a", "textID": tag, "text": tag})


def delta(fake: FakeUpstream, sid: str, text: str) -> None:
    fake.publish_live({"id": f"evt_delta_{sid}", "type": "session.next.text.delta",
                       "location": {"directory": "/"}, "data": {"timestamp": 0, "sessionID": sid,
                                                                "assistantMessageID": "msg_a", "textID": "t",
                                                                "delta": text}})


async def test_each_worker_decodes_only_the_frames_of_its_sessions_and_of_those_its_clients_watch(
        fake: FakeUpstream, database_url: str, engine: AsyncEngine, tmp_path: Path) -> None:
    sids = [at_home(0), at_home(1)]
    assert [home_worker(sid, 2) for sid in sids] == [0, 1]
    store = EventStore(engine, UPSTREAM)

    async def mirrored() -> bool:
        logs = {sid: [(i["seq"], i["id"]) for i in fake.sessions[sid].log] for sid in sids}
        return all([await stored_ids(store, sid) == logs[sid] for sid in sids])

    # A refusal lasts one sweep interval: long here, so that the burst below meets both refusals in place.
    bridge = BridgeProcess(tmp_path, fake.url, database_url, extra_env={
        "BRIDGE_WORKERS": "2", "BRIDGE_UPSTREAM_NAME": UPSTREAM, "BRIDGE_AUTH_SECRET": SECRET,
        "BRIDGE_SWEEP_INTERVAL_S": "300"})
    bridge.start()
    client = None
    try:
        await bridge.wait_ready(60)
        await wait_until(lambda: '"workers_ready"' in bridge.log_path.read_text(), 60, 0.1, message="workers_ready")
        # ready is not yet reading /global/event: a worker whose live stream connects after the first events
        # never sees its home session, and the other worker rightly takes both after its claim delay
        await wait_until(lambda: bridge.log_path.read_text().count('"live_stream_connected"') >= 2, 60, 0.1,
                         message="both workers reading /global/event")
        for sid in sids:  # new sessions: both workers see them live, each one's home worker claims it at once
            fake.add_session(sid)
            await text_ended(fake, sid, "first")

        def refused_elsewhere() -> bool:
            lines = bridge.log_path.read_text().splitlines()
            return all(any('"session_held_elsewhere"' in line and sid in line for line in lines) for sid in sids)

        await wait_until(refused_elsewhere, 30, 0.1, message="each worker refused the other's session")
        await wait_until(mirrored, 30, 0.05, message="both sessions mirrored")

        client = await WsClient.connect(bridge.url, mint_token(SECRET, UPSTREAM, None, 600, "web"))
        for sid in sids:
            await client.subscribe(sid, 0)
            await client.wait_for("caught_up", session=sid)
        before = await metric(bridge, SKIPPED)

        for sid in sids:
            for n in range(3):
                await text_ended(fake, sid, f"burst{n}")
            await fake.append_legacy(sid, "message.part.updated", {"part": {
                "id": f"prt_{sid}", "type": "text", "text": "legacy", "messageID": "msg_l", "sessionID": sid,
                "time": {"start": 1, "end": 2}}})
            delta(fake, sid, f"hello {sid}")

        # Both deltas reach the client, whichever worker it is on: one of the sessions is held by the other.
        for sid in sids:
            await client.wait_for("delta", session=sid)
        await wait_until(mirrored, 30, 0.05, message="the burst mirrored")
        # The worker without the client dropped the other worker's session's frames: 3 twins of v2 events, the
        # legacy part's bus event and twin, the delta. Its own session's frames and everything at the client's
        # worker (it holds one session, watches the other) were decoded.
        await wait_until(lambda: _grew(bridge, before, 6), 20, 0.05, message="six frames skipped")
        await wait_until(mirrored, 30, 0.05, message="still mirrored")
        assert await metric(bridge, SKIPPED) == before + 6
        assert [d["delta"] for d in client.of("delta")] == [f"hello {sid}" for sid in sids]
    finally:
        if client is not None:
            await client.close()
        bridge.stop()


async def _grew(bridge: BridgeProcess, before: float, by: float) -> bool:
    return await metric(bridge, SKIPPED) >= before + by

