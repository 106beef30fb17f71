"""Signed, expiring access tokens (HS256 JWT) for the WebSocket and the audit API.

A token is scoped to one upstream and either to a list of session ids or to every session of that
upstream (`sessions` absent). Browsers cannot set headers on a WebSocket, so the token may come as
`?token=` as well as `Authorization: Bearer`. Pure apart from reading the clock through `now`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import jwt

from bridge.errors import AuthError as AuthError  # compat: removed after merge

ALGORITHM = "HS256"
ISSUER = "opencode-bridge"


@dataclass(frozen=True)
class Claims:
    upstream: str
    sessions: frozenset[str] | None  # None: every session of the upstream
    expires_at: float
    subject: str = ""

    def allows(self, session_id: str) -> bool:
        return self.sessions is None or session_id in self.sessions

    def require(self, session_id: str) -> None:
        if not self.allows(session_id):
            raise AuthError("forbidden", f"token does not grant session {session_id}")


def mint_token(secret: str, upstream: str, sessions: Iterable[str] | None = None, ttl_s: float = 3600,
               subject: str = "", now: float | None = None) -> str:
    t = time.time() if now is None else now
    payload: dict[str, object] = {"iss": ISSUER, "upstream": upstream, "iat": int(t), "exp": int(t + ttl_s)}
    if sessions is not None:
        payload["sessions"] = sorted(set(sessions))
    if subject:
        payload["sub"] = subject
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
    return Claims(upstream=upstream, sessions=sessions, expires_at=float(exp),
                  subject=sub if isinstance(sub, str) else "")


def bearer_token(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The token from `Authorization: Bearer …`, else from `?token=`."""
    auth = headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return query.get("token") or None


def load_or_create_secret(configured: str, state_dir: Path) -> str:
    """BRIDGE_AUTH_SECRET if set; otherwise a random secret kept in `<state_dir>/auth_secret` (0600)."""
    if configured:
        return configured
    path = state_dir / "auth_secret"
    if path.exists():
        return path.read_text().strip()
    state_dir.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(48)
    path.touch(mode=0o600)
    path.write_text(value + "\n")
    return value
