"""The location of a route as its API reads it (docs/upstream.md §6): `location[directory]` on v2 routes,
`directory` on legacy ones (a legacy route ignores the v2 form)."""

from __future__ import annotations

from bridge.upstream.http_base import location_query


def test_each_api_gets_its_own_form_and_no_directory_no_query() -> None:
    assert location_query("/api/session/ses_1/prompt", "/srv/p") == {"location[directory]": "/srv/p"}
    assert location_query("/command", "/srv/p") == {"directory": "/srv/p"}
    assert location_query("/session/ses_1/todo", "/srv/ü") == {"directory": "/srv/ü"}
    assert location_query("/command", None) is None and location_query("/api/model", "") is None
