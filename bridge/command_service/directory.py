"""Which directory a session lives in (docs/commands.md, "Where a session lives"): every command, the legacy
queue and the `/v1` routes that ask the serve in the session's directory answer it here, one way.

`location.directory` is read by bridge.events.fields.location_directory (a string without NUL, which
PostgreSQL text cannot hold); an empty string says nothing. The serve's answer (`GET /api/session/{id}`)
is the newest, the mirror's row the fallback for a serve that leaves it out; a caller with no serve answer
at hand asks the mirror first (no upstream call for a session the mirror stored)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from bridge.events.fields import location_directory


class MirroredSession(Protocol):
    @property
    def directory(self) -> str | None: ...


class Mirror(Protocol):
    """The mirror's row of a session (bridge.store.commands_pending.CommandStore.session)."""

    async def session(self, session_id: str) -> MirroredSession | None: ...


class Serve(Protocol):
    """The serve's session, `GET /api/session/{id}` (bridge.upstream.commands.UpstreamCommands.session)."""

    async def session(self, session_id: str) -> Mapping[str, Any]: ...


def directory_of(info: Mapping[str, Any] | None, mirrored: MirroredSession | None = None) -> str | None:
    """The serve's `location.directory` of a session (`info`), else the mirror's; None when neither says."""
    found = location_directory(dict(info)) if info is not None else None
    if found:
        return found
    kept = mirrored.directory if mirrored is not None else None
    return kept if isinstance(kept, str) and kept and "\x00" not in kept else None


async def session_directory(mirror: Mirror, serve: Serve, session_id: str) -> str | None:
    """Where a session lives, the mirror asked first, then the serve (a session the mirror has not stored
    yet). SessionNotFound (from the serve) when neither knows it."""
    found = directory_of(None, await mirror.session(session_id))
    if found is not None:
        return found
    return directory_of(await serve.session(session_id))
