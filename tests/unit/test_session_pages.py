"""`GET /api/session` is walked page by page (docs/upstream.md §6): both the client and the gen-2 driver follow
`cursor.next` with one helper (bridge.upstream.responses), end on an empty page, a missing cursor or one they
followed already (a serve that loops), and refuse a page whose data is no list."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from bridge.errors import UpstreamError
from bridge.upstream.client import UpstreamClient
from bridge.upstream.gen2.driver import Gen2Driver
from bridge.upstream.http_base import UpstreamHttp
from bridge.upstream.responses import next_cursor, session_page
from bridge.upstream.transport import MockTransport, Request, Response
from tests.support.memory_upstream import json_response


def test_the_next_cursor_is_followed_once_and_the_walk_ends_where_the_answer_says_so() -> None:
    seen: set[str] = set()
    assert next_cursor({"cursor": {"next": "c1"}}, [{}], seen) == "c1" and seen == {"c1"}
    assert next_cursor({"cursor": {"next": "c1"}}, [{}], seen) is None  # a loop ends the walk
    assert next_cursor({"cursor": {"next": "c2"}}, [], seen) is None  # an empty page is the end
    for body in ({"cursor": {"next": None}}, {"cursor": "c3"}, {}, [], None):
        assert next_cursor(body, [{}], seen) is None
    assert seen == {"c1"}


def test_a_page_whose_data_is_no_list_is_an_upstream_error() -> None:
    assert session_page([{"id": "ses_A"}]) == [{"id": "ses_A"}]
    with pytest.raises(UpstreamError, match="data is not a list"):
        session_page({"id": "ses_A"})


def _pages(pages: dict[str | None, dict[str, Any]], asked: list[str | None]) -> MockTransport:
    """A serve answering `GET /api/session[?cursor=c]` with `pages[c]`."""
    async def handler(request: Request) -> Response:
        cursor = parse_qs(urlsplit(request.url).query).get("cursor", [None])[0]
        asked.append(cursor)
        return json_response(200, pages[cursor])
    return MockTransport(handler)


LOOPING = {None: {"data": [{"id": "ses_A"}], "cursor": {"next": "c1"}},
           "c1": {"data": [{"id": "ses_B"}], "cursor": {"next": "c2"}},
           "c2": {"data": [{"id": "ses_C"}], "cursor": {"next": "c1"}}}  # back to a page already read


async def test_the_client_and_the_gen2_driver_walk_the_same_pages_and_stop_at_a_loop() -> None:
    asked: list[str | None] = []
    async with UpstreamClient("http://serve.test", transport=_pages(LOOPING, asked)) as client:
        assert [s["id"] for s in await client.list_sessions()] == ["ses_A", "ses_B", "ses_C"]
    assert asked == [None, "c1", "c2"]
    asked.clear()
    async with UpstreamHttp("http://serve.test", transport=_pages(LOOPING, asked)) as http:
        assert [s.id for s in await Gen2Driver(http).list_sessions()] == ["ses_A", "ses_B", "ses_C"]
    assert asked == [None, "c1", "c2"]


async def test_both_refuse_a_page_that_is_no_list() -> None:
    bad = {None: {"data": {"id": "ses_A"}}}
    async with UpstreamClient("http://serve.test", transport=_pages(bad, [])) as client:
        with pytest.raises(UpstreamError, match="data is not a list"):
            await client.list_sessions()
    async with UpstreamHttp("http://serve.test", transport=_pages(bad, [])) as http:
        with pytest.raises(UpstreamError, match="data is not a list"):
            await Gen2Driver(http).list_sessions()
