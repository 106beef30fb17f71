"""bridge.command_service.directory: where a session lives, one way for every caller (commands, the legacy
queue, the `/v1` routes): the serve's `location.directory` without NUL, else the mirror's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.command_service.directory import directory_of, session_directory
from bridge.errors import SessionNotFound
from bridge.store.codecs import SessionRow
from tests.support.commands_twin import DIR, SID, UpstreamCommandsTwin
from tests.support.door_twins import DoorStoreTwin


def _info(directory: object) -> dict[str, Any]:
    return {"id": SID, "location": {"directory": directory}}


def test_the_serve_says_first_the_mirror_is_the_fallback() -> None:
    kept = SessionRow(SID, directory="/srv/kept")
    assert directory_of(_info("/srv/live"), kept) == "/srv/live"
    assert directory_of({"id": SID}, kept) == "/srv/kept"
    assert directory_of(_info(""), kept) == "/srv/kept"  # an empty string says nothing
    assert directory_of(None, None) is None
    assert directory_of({"location": "nowhere"}, SessionRow(SID)) is None


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.text())), st.one_of(st.none(), st.text()))
def test_never_a_nul_never_an_empty_string_never_a_non_string(live: object, kept: str | None) -> None:
    got = directory_of(_info(live), SessionRow(SID, directory=kept))
    assert got is None or (isinstance(got, str) and got and "\x00" not in got)
    if isinstance(live, str) and live and "\x00" not in live:
        assert got == live


class _Serve:
    def __init__(self, info: Mapping[str, Any] | None) -> None:
        self.info, self.asked = info, 0

    async def session(self, session_id: str) -> Mapping[str, Any]:
        self.asked += 1
        if self.info is None:
            raise SessionNotFound("GET: HTTP 404", 404)
        return self.info


async def test_the_mirror_is_asked_first_then_the_serve() -> None:
    mirror = DoorStoreTwin()
    mirror.tables.put(SID, directory="/srv/kept")
    serve = _Serve(_info("/srv/live"))
    assert await session_directory(mirror, serve, SID) == "/srv/kept"
    assert serve.asked == 0  # no upstream call for a session the mirror stored
    mirror.tables.put(SID, directory="bad\x00dir")
    assert await session_directory(mirror, serve, SID) == "/srv/live"
    assert await session_directory(DoorStoreTwin(), UpstreamCommandsTwin(), SID) == DIR
    with pytest.raises(SessionNotFound):
        await session_directory(DoorStoreTwin(), _Serve(None), SID)
