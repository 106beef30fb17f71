"""Upstream URLs with credentials in them (`http://user:password@host`): never logged or kept as is."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """The URL without its `user:password@` part, fit for logs and messages."""
    try:
        u = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if "@" not in u.netloc:
        return url
    return urlunsplit((u.scheme, "***@" + u.netloc.rsplit("@", 1)[1], u.path, u.query, u.fragment))


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """(the URL without `user:password@`, the user, the password), both decoded; None when absent."""
    u = urlsplit(url)
    if "@" not in u.netloc:
        return url, None, None
    netloc = u.netloc.rsplit("@", 1)[1]
    user = None if u.username is None else unquote(u.username)
    password = None if u.password is None else unquote(u.password)
    return urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment)), user, password
