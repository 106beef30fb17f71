"""Signed, expiring access tokens (HS256 JWT) for the WebSocket, the commands and the audit API.

A token is scoped to one upstream and either to a list of session ids or to every session of that
upstream (`sessions` absent), with a scope, an `approve` right, a subject and an id (`jti`) that the
revocation list names. Every claim rule (docs/security.md, "Tokens") lives in `claim_problem` and
`verify_token`, the same for minting and checking. Browsers cannot set headers on a WebSocket, so the
token may come as `?token=` as well as `Authorization: Bearer`. Pure apart from reading the clock
through `now` (and the secret file below).
"""

from __future__ import annotations

import math
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import jwt

from bridge.errors import AuthError, SecretFileError
from bridge.ids import valid_session_id

ALGORITHM = "HS256"
ISSUER = "opencode-bridge"
SCOPES = ("read", "prompt", "control")  # each grants what the one before does, and more (docs/commands.md)
# The right to answer permission requests (docs/security.md, "Approvals"): `once` answers `once` and
# `reject`; `always` also `always`, which upstream turns into a standing rule for the whole project
# directory, so it needs a token not limited to sessions. Absent: no approvals at all.
APPROVALS = ("none", "once", "always")
MAX_TTL_S = 30 * 86400.0  # `exp - iat` at most: a leaked token stops working within a month
CLOCK_SKEW_S = 60.0  # an `iat` this far in the future is still taken (clocks of two hosts)
MAX_JTI_CHARS = 64
MAX_SUBJECT_CHARS = 200


@dataclass(frozen=True)
class Claims:
    upstream: str
    sessions: frozenset[str] | None  # None: every session of the upstream
    expires_at: float
    subject: str = ""
    # read | prompt | control (docs/commands.md)
    scope: str = "read"
    approve: str = "none"  # none | once | always (APPROVALS)
    jti: str = ""

    def allows(self, session_id: str) -> bool:
        return self.sessions is None or session_id in self.sessions

    def require(self, session_id: str) -> None:
        if not self.allows(session_id):
            raise AuthError("forbidden", f"token does not grant session {session_id}")


def printable_id(value: object, max_chars: int) -> bool:
    """A non-empty string of at most `max_chars` printable characters (no CR, LF, ESC, NUL: log lines
    stay one line each, whatever the log format)."""
    return isinstance(value, str) and 0 < len(value) <= max_chars and value.isprintable() \
        and value.strip() == value


def default_approve(scope: str) -> str:
    """The one rule for an `approve` nobody stated, the same when minting (`opencode-bridge token`
    without `--approve`) and when verifying a token without the claim (minted by a backend of its own): a
    prompter may answer `once` (one token for the common product set-up, docs/security.md "Tokens");
    `always` is never a default."""
    return "none" if scope == "read" else "once"


def new_jti() -> str:
    """A token's id: 16 url-safe characters that never begin with `-`, so that `--revoke <jti>` on a
    command line is never read as an option (a random url-safe id began with `-` one time in 64)."""
    return "j" + secrets.token_urlsafe(12)[:15]


def mint_token(secret: str, upstream: str, sessions: Iterable[str] | None = None, ttl_s: float = 3600,
               subject: str = "", now: float | None = None, scope: str = "read", approve: str | None = None,
               jti: str | None = None) -> str:
    if not 0 < ttl_s <= MAX_TTL_S:  # also refuses nan
        raise ValueError(f"ttl must be more than 0 and at most {MAX_TTL_S:.0f} seconds")
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}")
    approve = default_approve(scope) if approve is None else approve
    problem = claim_problem(scope, subject, approve, sessions is not None)
    if problem is not None:
        raise ValueError(problem)
    t = time.time() if now is None else now
    payload: dict[str, object] = {"iss": ISSUER, "upstream": upstream, "iat": int(t), "exp": int(t + ttl_s),
                                  "jti": jti or new_jti()}
    if sessions is not None:
        payload["sessions"] = sorted(set(sessions))
    if subject:
        payload["sub"] = subject
    if scope != "read":
        payload["scope"] = scope
    payload["approve"] = approve  # always stated (a missing claim means default_approve's, verify_token)
    return jwt.encode(payload, secret, algorithm=ALGORITHM)


def claim_problem(scope: str, subject: str, approve: str, limited: bool) -> str | None:
    """What is wrong with this combination of claims, or None (the same rules for minting and checking)."""
    if subject and not printable_id(subject, MAX_SUBJECT_CHARS):
        return f"subject must be 1 to {MAX_SUBJECT_CHARS} printable characters"
    if scope != "read" and not subject:
        return f"a {scope} token needs a subject (who sends the commands, kept in every command row)"
    if approve not in APPROVALS:
        return f"approve must be one of {', '.join(APPROVALS)}"
    if approve != "none" and scope == "read":
        return "a read token cannot approve"
    if approve == "always" and limited:
        return "approve always needs a token not limited to sessions (it allows the whole directory)"
    return None


def _number(payload: Mapping[str, object], key: str) -> float:
    v = payload.get(key)
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
        raise AuthError("invalid", f"invalid token: {key} is not a finite number")
    return float(v)


class VerifiedTokens:
    """Tokens that passed `verify_token`, by the token string, for one secret and upstream (a
    WebSocketContext's): a client reconnecting to this process with the token it had skips the decode
    and the claim rules (~100 µs of PyJWT each); what changes with time, the expiry and the revocation
    list, is checked again at every use; another secret or upstream empties it. Bounded: when full, the
    expired go, then the older half."""

    def __init__(self, max_entries: int = 20_000) -> None:
        self.max_entries = max(1, max_entries)
        self._claims: dict[str, Claims] = {}
        self._of: tuple[str, str] | None = None  # the secret and upstream they were verified with

    def of(self, secret: str, upstream: str) -> VerifiedTokens:
        """These tokens if verified with this secret and upstream; emptied first if with others."""
        if self._of != (secret, upstream):
            self._claims, self._of = {}, (secret, upstream)
        return self

    def __len__(self) -> int:
        return len(self._claims)

    def get(self, token: str) -> Claims | None:
        return self._claims.get(token)

    def put(self, token: str, claims: Claims, now: float) -> None:
        if len(self._claims) >= self.max_entries:
            self._claims = {k: c for k, c in self._claims.items() if c.expires_at > now}
            if len(self._claims) >= self.max_entries:
                self._claims = dict(list(self._claims.items())[len(self._claims) // 2:])
        self._claims[token] = claims


def verify_token(token: str | None, secret: str, upstream: str, now: float | None = None,
                 revoked: Callable[[str], bool] | None = None, cache: VerifiedTokens | None = None) -> Claims:
    """The claims of a valid token, else AuthError (docs/security.md, "Tokens": every rule checked here).
    `revoked`: whether a `jti` is on the revocation list (bridge.revocation). `cache`: tokens of this
    `secret` and `upstream` verified before, whose expiry and revocation alone are checked again."""
    if not token:
        raise AuthError("missing", "no token: pass ?token= or Authorization: Bearer")
    t = time.time() if now is None else now
    claims = None if cache is None else cache.of(secret, upstream).get(token)
    if claims is None:
        claims = _verified(token, secret, upstream, t)
        if cache is not None:
            cache.put(token, claims, t)
    elif claims.expires_at <= t:
        raise AuthError("expired", "token expired")
    if revoked is not None and revoked(claims.jti):
        raise AuthError("revoked", "token revoked")
    return claims


def _verified(token: str, secret: str, upstream: str, t: float) -> Claims:
    """Signature and every claim rule, the expiry at `t` included; not the revocation list."""
    try:
        # Expiry is checked below against the injected clock, not by PyJWT's own.
        payload = jwt.decode(token, secret, algorithms=[ALGORITHM], issuer=ISSUER,
                             options={"verify_exp": False, "verify_iat": False,
                                      "require": ["exp", "iat", "jti", "iss", "upstream"]})
    except jwt.InvalidTokenError as e:
        raise AuthError("invalid", f"invalid token: {e}") from None
    exp, iat = _number(payload, "exp"), _number(payload, "iat")
    if iat > t + CLOCK_SKEW_S:
        raise AuthError("invalid", "invalid token: issued in the future")
    if not 0 < exp - iat <= MAX_TTL_S:
        raise AuthError("invalid", f"invalid token: exp - iat must be more than 0 and at most {MAX_TTL_S:.0f} s")
    if exp <= t:
        raise AuthError("expired", "token expired")
    jti = payload.get("jti")
    if not printable_id(jti, MAX_JTI_CHARS):
        raise AuthError("invalid", f"invalid token: jti must be 1 to {MAX_JTI_CHARS} printable characters")
    assert isinstance(jti, str)
    if payload.get("upstream") != upstream:
        raise AuthError("wrong_upstream", "token is for another upstream")
    raw = payload.get("sessions")
    sessions: frozenset[str] | None = None
    if raw is not None:
        if not isinstance(raw, list) or not all(valid_session_id(s) for s in raw):
            raise AuthError("invalid", "invalid token: sessions is not a list of session ids")
        sessions = frozenset(raw)
    sub, scope = payload.get("sub", ""), payload.get("scope", "read")
    approve = payload.get("approve", default_approve(scope) if isinstance(scope, str) else "none")
    if not isinstance(sub, str) or scope not in SCOPES or not isinstance(approve, str):
        raise AuthError("invalid", "invalid token: sub, scope or approve has the wrong type or value")
    problem = claim_problem(scope, sub, approve, sessions is not None)
    if problem is not None:
        raise AuthError("invalid", f"invalid token: {problem}")
    return Claims(upstream=upstream, sessions=sessions, expires_at=exp, subject=sub, scope=scope,
                  approve=approve, jti=jti)


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
