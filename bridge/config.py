"""Settings from the environment (and an optional TOML file), validated once at start-up.

A bad value stops start-up with one line naming the variable (`ConfigError`). Secrets are held in
`Secret` so that a settings object can be logged without leaking them.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bridge.directories import parse_roots
from bridge.errors import ConfigError
from bridge.forwarded import Network, parse_trusted
from bridge.hosts import is_loopback_host
from bridge.systemd_credentials import read_credentials
from bridge.url_credentials import redact_url


@dataclass(frozen=True)
class Secret:
    value: str

    def __repr__(self) -> str:
        return "Secret('***')" if self.value else "Secret('')"

    __str__ = __repr__


@dataclass(frozen=True)
class Settings:
    upstream_url: str = "http://127.0.0.1:4096"
    upstream_username: str = "opencode"
    upstream_password: Secret = field(default_factory=lambda: Secret(""))
    upstream_name: str = ""
    database_url: Secret = field(default_factory=lambda: Secret(""))
    # A streaming-replication standby of that database (optional): WebSocket replays, the session list and
    # the audit API read there (docs/scaling.md, "Reads on a standby").
    read_database_url: Secret = field(default_factory=lambda: Secret(""))
    state_dir: Path = Path("./.state")
    http_host: str = "127.0.0.1"
    http_port: int = 8765
    # Writer: a batch is what one read of the durable stream delivered, split at this many events.
    batch_max_events: int = 200
    # Reconnect backoff for upstream streams (capped exponential with full jitter).
    reconnect_min_s: float = 0.2
    reconnect_max_s: float = 5.0
    # /global/event sends `server.heartbeat` every 10 s; no byte for this long means the stream is dead.
    live_heartbeat_timeout_s: float = 45.0
    # A durable stream that stays silent although /global/event announced a newer v2 seq is restarted.
    durable_stall_s: float = 10.0
    # What sync-log answers may cost the serve, in items a second (docs/mirror.md "What a repair costs").
    sync_items_per_s: float = 50_000.0
    # Warm-session lifecycle (docs/lifecycle.md). A warm session with no durable event for idle_ttl_s,
    # not active upstream and without subscribers is released (never interrupted).
    idle_ttl_s: float = 600.0
    # Leases: renewed every heartbeat_interval_s; a lease not renewed for lease_ttl_s is orphaned and
    # adopted by the next sweep (every sweep_interval_s): adoption within lease_ttl_s + sweep_interval_s.
    # Unless set, both intervals follow the TTL (lease_ttl_s / 3, see `_derived_intervals`).
    lease_ttl_s: float = 15.0
    heartbeat_interval_s: float = 5.0
    sweep_interval_s: float = 5.0
    # A holder on this host whose pid is gone is dead: adopt without waiting for expiry.
    lease_pid_probe: bool = True
    # Status: prompted but no step started this long, and not active upstream -> stalled.
    stall_timeout_s: float = 30.0
    # /api/session/active is polled every active_poll_s while a session is running, backing off to
    # active_poll_idle_s otherwise (it also discovers sessions that became active).
    active_poll_s: float = 1.0
    active_poll_idle_s: float = 15.0
    # Discovery (one /history probe per cold known session) runs at start and after /global/event
    # reconnects, at most once per this many seconds: reconnects meanwhile coalesce into one run.
    discovery_interval_s: float = 10.0
    # Access tokens for the WebSocket and audit API (bridge.auth). Empty: a secret under state_dir.
    auth_secret: Secret = field(default_factory=lambda: Secret(""))
    # Local development only: no configured secret; a random one per start and a control token printed on
    # the console, as Jupyter does (docs/security.md). Loopback hosts only.
    auth_disabled: bool = False
    # Origins allowed to open the WebSocket and to POST commands (comma-separated); empty: same-origin and
    # non-browser clients.
    allowed_origins: str = ""
    # Host names requests may carry besides loopback, BRIDGE_HTTP_HOST and the allowed origins' hosts
    # (comma-separated; DNS rebinding, docs/security.md). IP literals are always taken.
    allowed_hosts: str = ""
    # Reverse proxies whose X-Forwarded-For / Forwarded name the client (comma-separated addresses or CIDRs,
    # docs/security.md "Behind a reverse proxy"); empty: the peer is the client.
    trusted_proxies: str = ""
    # Roots a session may be created at or under (`:`-separated absolute paths); empty: no session creation.
    allowed_directories: str = ""
    # WebSocket connections open at once per token (`jti`) and per client address, counted after auth.
    ws_max_per_token: int = 32
    ws_max_per_address: int = 256
    # Per WebSocket client outgoing queue (docs/websocket.md): deltas are dropped above half of these,
    # a client still behind at the limit is closed with 4429 and resumes from its last seq.
    ws_queue_max_messages: int = 2000
    ws_queue_max_bytes: int = 8 * 1024 * 1024
    # Bounds of the HTTP side (docs/operations.md, "Limits"): open connections, and the reads of the
    # WebSocket replay and audit API, which get a pool of their own with a statement timeout.
    http_max_connections: int = 1000
    read_pool_size: int = 4
    read_statement_timeout_s: float = 10.0
    log_format: str = "auto"  # auto | json | console
    log_level: str = "info"
    # The runtime of a session's first prompt (docs/commands.md, "Runtime affinity"): auto | legacy | v2.
    prompt_runtime: str = "auto"
    # `opencode-bridge retention` (docs/lifecycle.md, "Retention"): whole sessions whose last event is older
    # than this many days leave the mirror. 0 (unset): keep everything.
    retention_days: int = 0
    # Which OpenCode generation's driver runs (docs/upstream.md "OpenCode 2.x"): auto (what the serve says) | 1 | 2.
    upstream_generation: str = "auto"
    # Worker processes on this host (docs/operations.md "Workers"): one parent that systemd sees and this many
    # ordinary replicas sharing the HTTP port. Default: the number of cores; 1 is one process, as before.
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)

    @property
    def directory_roots(self) -> tuple[str, ...]:
        return parse_roots(self.allowed_directories)

    @property
    def proxy_networks(self) -> tuple[Network, ...]:
        return parse_trusted(self.trusted_proxies)

    @property
    def embedded_database(self) -> bool:
        return not self.database_url.value

    def redacted(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = repr(v) if isinstance(v, Secret) else str(v)
        return out


# Every setting: environment variable -> Settings field (public: the unit-file test checks each is documented).
ENV_VARS: dict[str, str] = {
    "BRIDGE_UPSTREAM_URL": "upstream_url",
    "BRIDGE_UPSTREAM_USERNAME": "upstream_username",
    "BRIDGE_UPSTREAM_PASSWORD": "upstream_password",
    "BRIDGE_UPSTREAM_NAME": "upstream_name",
    "BRIDGE_DATABASE_URL": "database_url",
    "BRIDGE_READ_DATABASE_URL": "read_database_url",
    "BRIDGE_STATE_DIR": "state_dir",
    "BRIDGE_HTTP_HOST": "http_host",
    "BRIDGE_HTTP_PORT": "http_port",
    "BRIDGE_BATCH_MAX_EVENTS": "batch_max_events",
    "BRIDGE_RECONNECT_MIN_S": "reconnect_min_s",
    "BRIDGE_RECONNECT_MAX_S": "reconnect_max_s",
    "BRIDGE_LIVE_HEARTBEAT_TIMEOUT_S": "live_heartbeat_timeout_s",
    "BRIDGE_DURABLE_STALL_S": "durable_stall_s",
    "BRIDGE_SYNC_ITEMS_PER_S": "sync_items_per_s",
    "BRIDGE_IDLE_TTL_S": "idle_ttl_s",
    "BRIDGE_LEASE_TTL_S": "lease_ttl_s",
    "BRIDGE_HEARTBEAT_INTERVAL_S": "heartbeat_interval_s",
    "BRIDGE_SWEEP_INTERVAL_S": "sweep_interval_s",
    "BRIDGE_LEASE_PID_PROBE": "lease_pid_probe",
    "BRIDGE_STALL_TIMEOUT_S": "stall_timeout_s",
    "BRIDGE_ACTIVE_POLL_S": "active_poll_s",
    "BRIDGE_ACTIVE_POLL_IDLE_S": "active_poll_idle_s",
    "BRIDGE_DISCOVERY_INTERVAL_S": "discovery_interval_s",
    "BRIDGE_AUTH_SECRET": "auth_secret",
    "BRIDGE_AUTH_DISABLED": "auth_disabled",
    "BRIDGE_ALLOWED_ORIGINS": "allowed_origins",
    "BRIDGE_ALLOWED_HOSTS": "allowed_hosts",
    "BRIDGE_TRUSTED_PROXIES": "trusted_proxies",
    "BRIDGE_ALLOWED_DIRECTORIES": "allowed_directories",
    "BRIDGE_WS_MAX_PER_TOKEN": "ws_max_per_token",
    "BRIDGE_WS_MAX_PER_ADDRESS": "ws_max_per_address",
    "BRIDGE_WS_QUEUE_MAX_MESSAGES": "ws_queue_max_messages",
    "BRIDGE_WS_QUEUE_MAX_BYTES": "ws_queue_max_bytes",
    "BRIDGE_HTTP_MAX_CONNECTIONS": "http_max_connections",
    "BRIDGE_READ_POOL_SIZE": "read_pool_size",
    "BRIDGE_READ_STATEMENT_TIMEOUT_S": "read_statement_timeout_s",
    "BRIDGE_LOG_FORMAT": "log_format",
    "BRIDGE_LOG_LEVEL": "log_level",
    "BRIDGE_PROMPT_RUNTIME": "prompt_runtime",
    "BRIDGE_RETENTION_DAYS": "retention_days",
    "BRIDGE_UPSTREAM_GENERATION": "upstream_generation",
    "BRIDGE_WORKERS": "workers",
}
_TOML_KEYS = {v: k for k, v in ENV_VARS.items()}


def _parse(name: str, fname: str, raw: str) -> Any:
    default = Settings.__dataclass_fields__[fname]
    kind = default.type
    try:
        if kind == "int":
            v: Any = int(raw)
            if v <= 0:
                raise ValueError("must be positive")
            return v
        if kind == "float":
            v = float(raw)
            if not math.isfinite(v) or not v > 0:
                raise ValueError("must be a positive finite number")
            return v
    except ValueError as e:
        raise ConfigError(f"{name}={raw!r} is not valid: {e}") from None
    if kind == "bool":
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}={raw!r} is not valid: expected true/false")
    if kind == "Secret":
        return Secret(raw)
    if kind == "Path":
        return Path(raw)
    return raw


def _validate(s: Settings) -> Settings:
    u = urlsplit(s.upstream_url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ConfigError(f"BRIDGE_UPSTREAM_URL={redact_url(s.upstream_url)!r} must be an http(s):// URL with a host")
    if s.database_url.value:
        d = urlsplit(s.database_url.value)
        if d.scheme not in ("postgresql", "postgres"):
            raise ConfigError("BRIDGE_DATABASE_URL must be a postgresql:// URL")
    if s.read_database_url.value:
        if urlsplit(s.read_database_url.value).scheme not in ("postgresql", "postgres"):
            raise ConfigError("BRIDGE_READ_DATABASE_URL must be a postgresql:// URL")
        if not s.database_url.value:
            raise ConfigError("BRIDGE_READ_DATABASE_URL needs BRIDGE_DATABASE_URL (the embedded database "
                              "has no standby)")
    if not 0 < s.http_port < 65536:
        raise ConfigError(f"BRIDGE_HTTP_PORT={s.http_port} must be between 1 and 65535")
    if s.prompt_runtime not in ("auto", "legacy", "v2"):
        raise ConfigError(f"BRIDGE_PROMPT_RUNTIME={s.prompt_runtime!r} must be auto, legacy or v2")
    if s.upstream_generation not in ("auto", "1", "2"):
        raise ConfigError(f"BRIDGE_UPSTREAM_GENERATION={s.upstream_generation!r} must be auto, 1 or 2")
    if s.log_format not in ("auto", "json", "console"):
        raise ConfigError(f"BRIDGE_LOG_FORMAT={s.log_format!r} must be auto, json or console")
    if s.log_level.lower() not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"BRIDGE_LOG_LEVEL={s.log_level!r} must be debug, info, warning or error")
    if s.reconnect_min_s > s.reconnect_max_s:
        raise ConfigError("BRIDGE_RECONNECT_MIN_S must not exceed BRIDGE_RECONNECT_MAX_S")
    if s.heartbeat_interval_s * 2 > s.lease_ttl_s:
        # One missed heartbeat must not cost the lease.
        hb, ttl = s.heartbeat_interval_s, s.lease_ttl_s
        raise ConfigError(
            f"BRIDGE_HEARTBEAT_INTERVAL_S={hb:g} must be at most half of BRIDGE_LEASE_TTL_S={ttl:g}: try "
            f"BRIDGE_HEARTBEAT_INTERVAL_S={ttl / _INTERVAL_PER_TTL:g} or BRIDGE_LEASE_TTL_S={hb * _INTERVAL_PER_TTL:g}"
            " (or leave BRIDGE_HEARTBEAT_INTERVAL_S unset: it follows the TTL)")
    if s.active_poll_s > s.active_poll_idle_s:
        raise ConfigError("BRIDGE_ACTIVE_POLL_S must not exceed BRIDGE_ACTIVE_POLL_IDLE_S")
    if s.auth_disabled and not is_loopback_host(s.http_host):
        # Anyone who reaches the port could read every session.
        raise ConfigError(f"BRIDGE_AUTH_DISABLED=true is refused with BRIDGE_HTTP_HOST={s.http_host!r}: "
                          "auth may be off only on a loopback host (127.0.0.1, ::1, localhost)")
    try:
        parse_roots(s.allowed_directories)
    except ValueError as e:
        raise ConfigError(f"BRIDGE_ALLOWED_DIRECTORIES: {e}") from None
    try:
        parse_trusted(s.trusted_proxies)
    except ValueError as e:
        raise ConfigError(f"BRIDGE_TRUSTED_PROXIES: {e}") from None
    if s.auth_secret.value and len(s.auth_secret.value) < 32:
        raise ConfigError("BRIDGE_AUTH_SECRET must be at least 32 characters (HS256 key)")
    if not s.upstream_name:
        port = u.port or (443 if u.scheme == "https" else 80)
        object.__setattr__(s, "upstream_name", f"{u.hostname}:{port}")
    return s


def load_settings(env: Mapping[str, str] | None = None, toml_path: str | None = None) -> Settings:
    """Environment wins over the TOML file (`BRIDGE_CONFIG`), which wins over the defaults."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    toml_path = toml_path or env.get("BRIDGE_CONFIG")
    if toml_path:
        try:
            with open(toml_path, "rb") as fh:
                doc = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"BRIDGE_CONFIG={toml_path!r} cannot be read: {e}") from None
        for key, raw in doc.items():
            if key not in _TOML_KEYS:
                raise ConfigError(f"BRIDGE_CONFIG: unknown key {key!r}")
            values[key] = _parse(f"{toml_path}:{key}", key, str(raw))
    for name, fname in ENV_VARS.items():
        raw = env.get(name)
        if raw is not None and raw != "":
            values[fname] = _parse(name, fname, raw)
    values.update({name: Secret(raw) for name, raw in read_credentials(env, values).items()})
    values.update(_derived_intervals(values))
    return _validate(Settings(**values))


# Heartbeat and sweep intervals as a fraction of the lease TTL: 5 s each for the default 15 s. A third
# leaves two missed heartbeats before the lease is lost.
_INTERVAL_PER_TTL = 3.0


def _derived_intervals(values: Mapping[str, Any]) -> dict[str, float]:
    """The heartbeat and sweep intervals that were not set, derived from the (set or default) lease TTL."""
    ttl = float(values.get("lease_ttl_s", Settings.lease_ttl_s))
    return {name: ttl / _INTERVAL_PER_TTL for name in ("heartbeat_interval_s", "sweep_interval_s")
            if name not in values}
