"""Signed, expiring access tokens (HS256 JWT) for the WebSocket and the audit API.

A token is scoped to one upstream and either to a list of session ids or to every session of that
upstream (`sessions` absent). Browsers cannot set headers on a WebSocket, so the token may come as
`?token=` as well as `Authorization: Bearer`. Pure apart from reading the clock through `now`.
"""

from __future__ import annotations

import os
import secrets
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import jwt

from bridge.errors import AuthError, SecretFileError

ALGORITHM = "HS256"
ISSUER = "opencode-bridge"
SCOPES = ("read", "prompt", "control")  # each grants what the one before does, and more (docs/commands.md)
MAX_TTL_S = 30 * 86400.0  # `opencode-bridge token --ttl`: a leaked token stops working within a month


@dataclass(frozen=True)
class Claims:
    upstream: str
    sessions: frozenset[str] | None  # None: every session of the upstream
    expires_at: float
    subject: str = ""
    # read | prompt | control (docs/commands.md); a token minted before scopes existed is `read`.
    scope: str = "read"

    def allows(self, session_id: str) -> bool:
        return self.sessions is None or session_id in self.sessions

    def require(self, session_id: str) -> None:
        if not self.allows(session_id):
            raise AuthError("forbidden", f"token does not grant session {session_id}")


def mint_token(secret: str, upstream: str, sessions: Iterable[str] | None = None, ttl_s: float = 3600,
               subject: str = "", now: float | None = None, scope: str = "read") -> str:
    if not 0 < ttl_s <= MAX_TTL_S:  # also refuses nan
        raise ValueError(f"ttl must be more than 0 and at most {MAX_TTL_S:.0f} seconds")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}")
    t = time.time() if now is None else now
    payload: dict[str, object] = {"iss": ISSUER, "upstream": upstream, "iat": int(t), "exp": int(t + ttl_s)}
    if sessions is not None:
        payload["sessions"] = sorted(set(sessions))
    if subject:
        payload["sub"] = subject
    if scope != "read":
        payload["scope"] = scope
    return jwt.encode(payload, secret, algorithm=ALGORITHM)


def verify_token(token: str | None, secret: str, upstream: str, now: float | None = None) -> Claims:
    if not token:
        raise AuthError("missing", "no token: pass ?token= or Authorization: Bearer")
    t = time.time() if now is None else now
    try:
        # Expiry is checked below against the injected clock, not by PyJWT's own.
        payload = jwt.decode(token, secret, algorithms=[ALGORITHM], issuer=ISSUER,
                             options={"verify_exp": False, "verify_iat": False, "require": ["exp", "iss", "upstream"]})
    except jwt.InvalidTokenError as e:
        raise AuthError("invalid", f"invalid token: {e}") from None
    exp = payload.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise AuthError("invalid", "invalid token: exp is not a number")
    if exp <= t:
        raise AuthError("expired", "token expired")
    if payload.get("upstream") != upstream:
        raise AuthError("wrong_upstream", "token is for another upstream")
    raw = payload.get("sessions")
    sessions: frozenset[str] | None = None
    if raw is not None:
        if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
            raise AuthError("invalid", "invalid token: sessions is not a list of ids")
        sessions = frozenset(raw)
    sub = payload.get("sub")
    scope = payload.get("scope", "read")
    if scope not in SCOPES:
        raise AuthError("invalid", "invalid token: unknown scope")
    return Claims(upstream=upstream, sessions=sessions, expires_at=float(exp),
                  subject=sub if isinstance(sub, str) else "", scope=scope)


def bearer_token(headers: Mapping[str, str], query: Mapping[str, str] | None = None) -> str | None:
    """The token from `Authorization: Bearer …`, else from `?token=` when `query` is given: only the
    WebSocket passes it (a browser cannot set headers there); on plain HTTP a token in the URL would
    end up in proxy and access logs."""
    auth = headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return (query or {}).get("token") or None


SECRET_MIN_CHARS = 32  # as BRIDGE_AUTH_SECRET (bridge.config)
_loaded: dict[Path, str] = {}


def load_or_create_secret(configured: str, state_dir: Path) -> str:
    """BRIDGE_AUTH_SECRET if set; otherwise a random secret kept in `<state_dir>/auth_secret` (0600).

    Idempotent and cheap: the file is read (or created) once per process and path, so every component
    that asks gets the same key. Created with O_EXCL (two processes starting together: one creates, the
    other reads what it wrote) and written in full before anyone can open it under its final name. An
    existing file that is empty, shorter than 32 characters, or readable by group/others raises
    `SecretFileError` naming the file — never a key that would make every token check fail."""
    if configured:
        return configured
    path = (state_dir / "auth_secret").absolute()
    cached = _loaded.get(path)
    if cached is not None:
        return cached
    value = _read_secret(path) if path.exists() else _create_secret(path)
    _loaded[path] = value
    return value


def _create_secret(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(48)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(value + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # atomic, and fails if another process created it first
        except FileExistsError:
            return _read_secret(path)
    finally:
        tmp.unlink(missing_ok=True)
    return value


def _read_secret(path: Path) -> str:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise SecretFileError(f"{path} is readable by others (mode {mode:04o}): chmod 600 it, or remove it "
                              "to have a new one generated (tokens minted with it stop working)")
    value = path.read_text().strip()
    if len(value) < SECRET_MIN_CHARS:
        raise SecretFileError(f"{path} holds {len(value)} characters, at least {SECRET_MIN_CHARS} are needed: "
                              "remove it to have a new one generated, or set BRIDGE_AUTH_SECRET")
    return value
