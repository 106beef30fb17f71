"""bridge.command_service.model_check: a prompt for a model without a connected credential is refused before
anything is sent (`model_unavailable`); the location's models are asked again only after MODELS_TTL_S."""

from __future__ import annotations

import pytest

from bridge.command_service.model_check import MODELS_TTL_S, ModelCheck
from bridge.commands.model import CommandError
from tests.support.commands_twin import DIR, UpstreamCommandsTwin
from tests.support.serve_model import Clock


class _Counting(UpstreamCommandsTwin):
    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    async def connected_models(self, directory: str) -> set[tuple[str, str]]:
        self.asked += 1
        return self.connected


async def test_the_sessions_model_or_else_the_locations_default_must_be_connected() -> None:
    twin, clock = _Counting(), Clock(1000.0)
    check = ModelCheck(twin, clock)  # type: ignore[arg-type]
    await check.check({}, DIR)  # the default, mock/mock-1, is connected
    await check.check({"model": {"providerID": "mock", "id": "mock-1"}}, DIR)
    with pytest.raises(CommandError) as e:
        await check.check({"model": {"providerID": "anthropic", "id": "claude"}}, DIR)
    assert e.value.code == "model_unavailable" and "anthropic/claude" in e.value.message


async def test_the_locations_models_are_kept_for_a_while() -> None:
    twin, clock = _Counting(), Clock(1000.0)
    check = ModelCheck(twin, clock)  # type: ignore[arg-type]
    await check.check({}, DIR)
    twin.connected = set()  # the operator removed the credential
    await check.check({}, DIR)  # still the kept answer
    assert twin.asked == 1
    clock.now += MODELS_TTL_S
    with pytest.raises(CommandError):
        await check.check({}, DIR)
    assert twin.asked == 2
