"""The shape of an upstream session id, checked at every boundary where one comes from a client.

opencode 1.18.33 makes ids `ses_` + 26 characters of `[0-9A-Za-z]` (the captures under fixtures/ have
nothing else; any unknown id is a 404 `SessionNotFoundError`, docs/upstream.md §6). The check accepts
`ses_` + 1..60 of `[0-9A-Za-z_]`: underscores and length allow hand-chosen ids (`POST /api/session`
takes one) while keeping out everything that could alter an upstream URL (`/`, `.`, `?`, `#`, `%`),
that PostgreSQL `text` cannot hold (NUL) or that a driver cannot encode (lone surrogates). Pure.
"""

from __future__ import annotations

import re

SESSION_ID_PATTERN = "^ses_[0-9A-Za-z_]{1,60}$"  # the same in bridge/http/openapi.json and asyncapi.json
_SESSION_ID = re.compile(SESSION_ID_PATTERN[1:-1])

# The other ids a client chooses, as regular expressions the OpenAPI document carries verbatim (the code
# checks with the same ones: tests/unit/test_contract_rules.py).
# A command id: 1 to 100 printable ASCII characters, no space at either end (it ends up in log lines).
COMMAND_ID_PATTERN = "^[!-~](?:[ -~]{0,98}[!-~])?$"
# A name (provider, model, agent, request and message ids, slash commands): printable ASCII without space,
# '/', '?', '#', '%' or '\\' (it ends up in upstream paths and logs).
NAME_PATTERN = "^[!\"$&-.0->@-\\[\\]-~]+$"
# Free text (prompts, titles, arguments, query values): anything but NUL (PostgreSQL text cannot hold it).
NO_NUL_PATTERN = "^[^\\u0000]*$"
_COMMAND_ID = re.compile(COMMAND_ID_PATTERN)
_NAME = re.compile(NAME_PATTERN)


def valid_command_id(value: object) -> bool:
    return isinstance(value, str) and _COMMAND_ID.fullmatch(value) is not None


def valid_name(value: object) -> bool:
    return isinstance(value, str) and _NAME.fullmatch(value) is not None

SESSION_ID_RULE = "a session id is 'ses_' followed by 1 to 60 letters, digits or underscores"


def valid_session_id(value: object) -> bool:
    """True for a string shaped like an upstream session id (see the module docstring)."""
    return isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None
