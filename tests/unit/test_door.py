"""bridge.command_service.door: the door every transport enters (`run_command`: an Outcome, never an
exception, for a refused command or a database away) and the daemon's build of it per serve generation."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import OperationalError

from bridge.command_service import CommandService
from bridge.command_service.door import build_door, run_command
from bridge.config import Settings
from bridge.store.db import make_engine
from bridge.store.memory import MemoryPromptQueue
from bridge.upstream.client import UpstreamClient
from bridge.upstream.gen2.commands import Gen2Commands
from tests.support.commands_twin import SID, UpstreamCommandsTwin
from tests.support.door_twins import DoorStoreTwin, claims

URL = "postgresql://u:p@127.0.0.1:1/none"


def _service(store: Any = None) -> CommandService:
    store = store or DoorStoreTwin()
    return CommandService(store, UpstreamCommandsTwin(),  # type: ignore[arg-type]
                          queue=MemoryPromptQueue(store.tables))  # type: ignore[arg-type]


async def test_a_refused_command_is_an_outcome_in_the_envelope() -> None:
    out = await run_command(_service(), claims(), "prompt", {"command_id": "c1"}, SID)
    assert out.status == 400 and out.body["error"]["code"] == "bad_request"
    out = await run_command(_service(), claims("read"), "prompt",
                            {"command_id": "c1", "text": "hi", "delivery": "steer"}, SID)
    assert out.status == 403 and out.body["error"]["code"] == "forbidden"


async def test_a_database_away_is_a_503_to_retry() -> None:
    class Away(DoorStoreTwin):
        async def tombstoned(self, session_id: str) -> bool:
            raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    out = await run_command(_service(Away()), claims(), "prompt",
                            {"command_id": "c1", "text": "hi", "delivery": "steer"}, SID)
    assert out.status == 503 and out.body["error"]["code"] == "upstream_unavailable"
    assert out.body["error"]["correlation_id"] in out.body["error"]["message"]


async def test_the_door_makes_the_calls_of_the_serves_generation() -> None:
    settings, engine = Settings(upstream_name="up"), make_engine(URL)
    client = UpstreamClient("http://127.0.0.1:4096", "opencode", "")
    try:
        one, two = build_door(settings, engine, client, 1), build_door(settings, engine, client, 2)
        assert not isinstance(one.upstream, Gen2Commands) and isinstance(two.upstream, Gen2Commands)
        assert one.widen is not None and one.store.upstream == "up"
        assert one.settings.prompt_runtime == settings.prompt_runtime
    finally:
        await client.aclose()
        await engine.dispose()
