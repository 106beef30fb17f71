"""The shape of upstream ids, checked at every boundary before an id reaches a URL, a row or a lease.

opencode names a session `ses_` followed by letters and digits (26 of them in every capture);
`POST /api/session` also accepts an id chosen by the caller (docs/upstream.md §6). The bridge accepts
`ses_` + 1..124 of `[A-Za-z0-9_]`: no `/`, `.`, `%`, `?`, `#`, NUL or other control character can then
alter an upstream path or fail in the database driver.
"""

from __future__ import annotations

import re

SESSION_ID_MAX = 128
_SESSION_ID = re.compile(rf"ses_[A-Za-z0-9_]{{1,{SESSION_ID_MAX - 4}}}")


def valid_session_id(value: object) -> bool:
    """True for a string of the upstream's session id shape."""
    return isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None
