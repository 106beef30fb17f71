"""The rules the code enforces on client input, as the regular expressions the OpenAPI document carries
(bridge/http/openapi.json): each expression accepts exactly what its check accepts, so a request valid by
the document is never refused for its shape, and one the document refuses never gets through."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bridge import directories, ids
from bridge.commands import attachments
from bridge.http import query_params

ROOT = Path(__file__).resolve().parents[2]
SPEC: dict[str, Any] = json.loads((ROOT / "bridge" / "http" / "openapi.json").read_text())


def _ok(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def test_the_document_is_openapi_3_1_and_carries_the_code_s_expressions() -> None:
    assert SPEC["openapi"] == "3.1.0" and "audit" not in SPEC["info"]["title"].lower()
    schemas = SPEC["components"]["schemas"]
    assert schemas["SessionId"]["pattern"] == ids.SESSION_ID_PATTERN
    assert schemas["CommandId"]["pattern"] == ids.COMMAND_ID_PATTERN
    assert schemas["Name"]["pattern"] == ids.NAME_PATTERN
    assert schemas["Directory"]["pattern"] == directories.PATH_PATTERN
    text = json.dumps(SPEC)
    for pattern in (attachments.DATA_URL_PATTERN, attachments.MIME_PATTERN, query_params.TIME_PATTERN,
                    query_params.TOOL_CURSOR_PATTERN, ids.NO_NUL_PATTERN):
        assert json.dumps(pattern) in text, pattern
    assert "nullable" not in text  # 3.1: null is a type


_ascii = st.text(st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=110)
_any = st.text(max_size=40)


@given(st.one_of(_ascii, _any))
def test_command_ids_and_names(value: str) -> None:
    assert ids.valid_command_id(value) == (0 < len(value) <= 100 and value.isascii() and value.isprintable()
                                           and value.strip() == value)
    assert ids.valid_name(value) == (len(value) > 0 and all(
        c.isascii() and c.isprintable() and c not in "/?#%\\ " for c in value))


_path_chars = st.sampled_from(list("/.ab é\x00\x1b\u200b\u2028\ufeff\x85"))


@given(st.one_of(st.text(_path_chars, max_size=12), st.builds(lambda s: "/" + s, st.text(_path_chars, max_size=12))))
def test_the_directory_expression_is_path_problem(path: str) -> None:
    assert _ok(directories.PATH_PATTERN, path) == (directories.path_problem(path) is None)


_url = st.builds(lambda mime, params, b64, data: f"data:{mime}{params}{';base64' if b64 else ''},{data}",
                 st.sampled_from(["text/plain", "", "a;b", "x,y", "t\x00"]),
                 st.sampled_from(["", ";charset=utf-8", ";a=", ";=b", ";base64x"]), st.booleans(),
                 st.text(st.sampled_from(list("aGk=+/ \n\x00,;")), max_size=12))


@given(st.one_of(_url, _any))
def test_the_data_url_expression_is_data_url_bytes(url: str) -> None:
    try:
        attachments.data_url_bytes(url)
        accepted = True
    except attachments.AttachmentError:
        accepted = False
    assert _ok(attachments.DATA_URL_PATTERN, url) == accepted


@given(st.one_of(st.sampled_from(["text/plain", "image/png", "application/json", "application/pdf", "text/",
                                  "Text/plain", "image/svg+xml", "application/x-sh"]), _any))
def test_the_mime_expression_is_the_allowed_types(mime: str) -> None:
    expected = attachments._MIME.fullmatch(mime) is not None and attachments.allowed_mime(mime)
    assert _ok(attachments.MIME_PATTERN, mime) == expected


@given(st.datetimes(timezones=st.sampled_from([None])), st.sampled_from(["Z", "+01:00", "-23:59", ""]),
       st.booleans())
def test_every_rfc3339_time_python_can_read_matches_the_time_expression(t: Any, zone: str, micro: bool) -> None:
    text = t.isoformat(timespec="microseconds" if micro else "seconds") + zone
    assert _ok(query_params.TIME_PATTERN, text) == (zone != "")


@given(st.from_regex(query_params.TIME_PATTERN, fullmatch=True))
def test_every_time_of_the_expression_is_a_real_date(text: str) -> None:
    from datetime import datetime
    datetime.fromisoformat(text.replace("Z", "+00:00"))  # never raises: the expression has no 30 February
