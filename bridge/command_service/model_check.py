"""A prompt's model checked before it is sent: the serve admits a prompt for a model without credentials and
then stays silent (docs/upstream.md §4, `n-switch-and-unavailable-model`), so the command door refuses it
first (`model_unavailable`, docs/commands.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridge.commands.model import CommandError
from bridge.upstream.commands import UpstreamCommands

MODELS_TTL_S = 10.0
_MAX_LOCATIONS = 100


class ModelCheck:
    def __init__(self, upstream: UpstreamCommands, clock: Callable[[], float]) -> None:
        self._upstream = upstream
        self._clock = clock
        self._models: dict[str, tuple[float, tuple[str, str] | None, set[tuple[str, str]]]] = {}

    async def check(self, info: dict[str, Any], directory: str) -> None:
        """Raise `model_unavailable` when the session's model (`info`: GET /api/session/{id}), or the
        location's default, has no connected credential."""
        m = info.get("model")
        pair: tuple[str, str] | None = None
        if isinstance(m, dict) and isinstance(m.get("providerID"), str) and isinstance(m.get("id"), str):
            pair = (m["providerID"], m["id"])
        default, connected = await self._location_models(directory)
        pair = pair or default
        if pair is not None and pair not in connected:
            raise CommandError("model_unavailable",
                               f"model {pair[0]}/{pair[1]} has no connected credential upstream: nothing sent")

    async def _location_models(self, directory: str) -> tuple[tuple[str, str] | None, set[tuple[str, str]]]:
        """(configured default model, connected models) of a location, kept MODELS_TTL_S: both change only
        when the operator edits the serve's config or credentials, and `/api/model` is a large answer."""
        cached = self._models.get(directory)
        if cached is not None and cached[0] > self._clock():
            return cached[1], cached[2]
        default = await self._upstream.default_model(directory)
        models = await self._upstream.connected_models(directory)
        if len(self._models) > _MAX_LOCATIONS:
            self._models.clear()
        self._models[directory] = (self._clock() + MODELS_TTL_S, default, models)
        return default, models
