"""The shape of an upstream session id, checked at every boundary where one comes from a client.

opencode 1.18.33 makes ids `ses_` + 26 characters of `[0-9A-Za-z]` (the captures under fixtures/ have
nothing else; any unknown id is a 404 `SessionNotFoundError`, docs/upstream.md §6). The check accepts
`ses_` + 1..60 of `[0-9A-Za-z_]`: underscores and length allow hand-chosen ids (`POST /api/session`
takes one) while keeping out everything that could alter an upstream URL (`/`, `.`, `?`, `#`, `%`),
that PostgreSQL `text` cannot hold (NUL) or that a driver cannot encode (lone surrogates). Pure.
"""

from __future__ import annotations

import re

_SESSION_ID = re.compile(r"ses_[0-9A-Za-z_]{1,60}")

SESSION_ID_RULE = "a session id is 'ses_' followed by 1 to 60 letters, digits or underscores"


def valid_session_id(value: object) -> bool:
    """True for a string shaped like an upstream session id (see the module docstring)."""
    return isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None
