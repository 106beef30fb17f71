"""`opencode-bridge doctor`: checks the bridge's surroundings and explains each failure with a fix.

Checks: database reachable and migrations at head; no session parked (its follower kept failing); the
requests the agent waits for (permission requests, questions: listed);
upstream reachable, authenticated, its OpenCode generation (a driver of this build fits it) and version;
the default model's provider has a connected credential
(otherwise a prompt is admitted and then nothing happens, docs/upstream.md §4); clocks agree (this host, the
database, the upstream's `Date`). The upstream is asked through `UpstreamClient`, like the daemon does
(same auth, same errors); the URL is shown without credentials.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text

from bridge.config import Settings
from bridge.errors import Unauthorized, UpstreamError
from bridge.ops.pending import SHOWN, pending_lines
from bridge.ops.upstream_generation import AVAILABLE_DRIVERS
from bridge.store.chat_sessions import LeaseStore
from bridge.store.codecs import SessionRow
from bridge.store.commands_pending import PendingStore, StoredRequest
from bridge.store.db import current_revision, head_revision, make_engine
from bridge.upstream.client import UpstreamClient
from bridge.upstream.generation import Recognition, choose_driver
from bridge.upstream.recognize import recognize
from bridge.upstream.transport import Transport

TESTED_UPSTREAM_VERSION = "1.18.33"
MAX_CLOCK_SKEW_S = 5.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def render(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        lines.append(f"{'ok  ' if c.ok else 'FAIL'}  {c.name}: {c.detail}")
        if not c.ok and c.fix:
            lines.append(f"      fix: {c.fix}")
    failed = sum(not c.ok for c in checks)
    lines.append("all checks passed" if not failed else f"{failed} check(s) failed")
    return "\n".join(lines) + "\n"


async def run_doctor(settings: Settings, database_url: str, *, now: Callable[[], float] = time.time) -> list[Check]:
    checks: list[Check] = []
    # Each remote clock is compared with ours at the moment it was read (the checks take a while).
    db_skew = await _database(database_url, checks, now, settings.upstream_name)
    upstream_skew = await check_upstream(settings, checks, now)
    checks.append(clock_check(now(), db_skew, upstream_skew))
    return checks


async def _database(url: str, checks: list[Check], now: Callable[[], float], upstream: str) -> float | None:
    """Adds the database checks; returns the database clock minus ours (None if unreachable)."""
    engine = make_engine(url, pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as conn:
            before = now()
            row = (await conn.execute(text("SELECT extract(epoch FROM clock_timestamp()), version()"))).one()
            skew = float(row[0]) - (before + now()) / 2
        checks.append(Check("database", True, f"reachable ({str(row[1]).split(',')[0]})"))
        current, head = await current_revision(engine), head_revision()
        if current == head:
            checks.append(Check("migrations", True, f"at head ({head})"))
        else:
            checks.append(Check("migrations", False, f"database at {current or 'none'}, code expects {head}",
                                "run `opencode-bridge migrate` (the daemon also migrates on start)"))
            return skew
        checks.append(_parked(await LeaseStore(engine, upstream).parked()))
        checks.append(pending_check(await PendingStore(engine, upstream).pending(), datetime.now(UTC)))
        return skew
    except Exception as e:
        checks.append(Check("database", False, f"not reachable: {type(e).__name__}: {str(e)[:200]}",
                            "check BRIDGE_DATABASE_URL (host, port, user, password, database) and that "
                            "PostgreSQL is running; without it the embedded database under "
                            "BRIDGE_STATE_DIR is used"))
        return None
    finally:
        await engine.dispose()


async def check_upstream(settings: Settings, checks: list[Check], now: Callable[[], float] = time.time, *,
                         transport: Transport | None = None) -> float | None:
    """Adds the upstream checks; returns the upstream's `Date` minus our clock (None if unknown)."""
    async with UpstreamClient(settings.upstream_url, settings.upstream_username, settings.upstream_password.value,
                              request_timeout_s=10.0, transport=transport) as client:
        base = client.base_url  # without credentials
        try:
            health = await client.server_health()
        except Unauthorized:
            checks.append(Check("upstream", True, f"reachable at {base}"))
            checks.append(_unauthorized(client.has_credentials))
            return None
        except UpstreamError as e:
            checks.append(Check("upstream", False, f"not reachable at {base}: {e}",
                                "start `opencode serve` or fix BRIDGE_UPSTREAM_URL"))
            return None
        skew = None if health.server_time is None else health.server_time - now()
        checks.append(Check("upstream", True, f"reachable at {base}"))
        checks.append(Check("upstream auth", True, "authenticated" if client.has_credentials else "no password needed"))
        recognition = await recognize(client)
        checks.append(generation_check(recognition, settings.upstream_generation, base))
        if recognition.generation not in (None, 1):
            return skew  # the version and model checks below read 1.x routes
        checks.append(_version(health.body))
        await _default_model(client, checks)
        return skew


def generation_check(recognition: Recognition, setting: str, upstream: str,
                     available: frozenset[int] = AVAILABLE_DRIVERS) -> Check:
    """The serve's OpenCode generation and whether a driver of this build runs it (docs/upstream.md
    "OpenCode 2.x"): the daemon refuses to start where this check fails, with the same line."""
    choice = choose_driver(recognition, setting, available, upstream)
    if choice.refusal is not None:
        return Check("upstream generation", False, recognition.describe(), choice.refusal)
    if recognition.generation is None:
        return Check("upstream generation", False, recognition.describe(),
                     "the serve answered neither GET /api/info (2.x) nor GET /global/health (1.x) with a "
                     "version: is BRIDGE_UPSTREAM_URL an opencode serve?")
    return Check("upstream generation", True, f"{recognition.describe()}: the {choice.generation}.x driver")


def _parked(parked: list[SessionRow]) -> Check:
    if not parked:
        return Check("parked sessions", True, "none")
    shown = "; ".join(f"{row.session_id}: {row.status_reason}" for row in parked[:5])
    more = f" (and {len(parked) - 5} more)" if len(parked) > 5 else ""
    return Check("parked sessions", False, f"{len(parked)} not followed any more: {shown}{more}",
                 "fix the cause in the reason (the bridge's log has `session_parked` with the traceback before "
                 "it), then warm the session again: a WebSocket subscribe does (docs/lifecycle.md)")


def pending_check(rows: list[StoredRequest], now: datetime) -> Check:
    """What the agent waits for (permission requests, questions): listed, oldest first. Informational: a
    person answers them (docs/operations.md, "Pending requests")."""
    if not rows:
        return Check("pending requests", True, "none")
    more = f"; and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
    return Check("pending requests", True, f"{len(rows)} waiting for an answer: "
                 + "; ".join(pending_lines(rows, now)) + more)


def _unauthorized(had_password: bool) -> Check:
    if had_password:
        return Check("upstream auth", False, "401: the upstream refused our username/password",
                     "set BRIDGE_UPSTREAM_PASSWORD (or the upstream-password credential) to the serve's "
                     "OPENCODE_SERVER_PASSWORD, and BRIDGE_UPSTREAM_USERNAME to its OPENCODE_SERVER_USERNAME "
                     "(default opencode)")
    return Check("upstream auth", False, "401: the upstream requires a password and none is configured",
                 "set BRIDGE_UPSTREAM_PASSWORD to the serve's OPENCODE_SERVER_PASSWORD")


def _version(body: Any) -> Check:
    version = body.get("version") if isinstance(body, dict) else None
    if not isinstance(version, str):
        return Check("upstream version", False, "unknown (no version in /global/health)",
                     f"the bridge is verified against opencode {TESTED_UPSTREAM_VERSION}")
    note = "" if version == TESTED_UPSTREAM_VERSION else f" (the bridge is verified against {TESTED_UPSTREAM_VERSION})"
    return Check("upstream version", True, f"opencode {version}{note}")


async def _default_model(client: UpstreamClient, checks: list[Check]) -> None:
    """The default model is `model` of the serve's config (legacy `GET /config`); providers with a
    credential are the ones `GET /api/provider` lists (the legacy `/provider` calls them `connected`)."""
    try:
        config = await client.config()
        providers = await client.providers()
    except UpstreamError as e:
        checks.append(Check("default model", False, f"cannot read the serve's config: {e}",
                            "check that the upstream is opencode serve " + TESTED_UPSTREAM_VERSION))
        return
    connected = sorted(str(p.get("id")) for p in providers)
    model = config.get("model") if isinstance(config, dict) else None
    if not isinstance(model, str) or "/" not in model:
        ok = bool(connected)
        checks.append(Check("default model", ok, f"not set; connected providers: {', '.join(connected) or 'none'}",
                            "" if ok else "configure a provider credential (`opencode auth login`) and `model`"))
        return
    provider = model.split("/", 1)[0]
    if provider in connected:
        checks.append(Check("default model", True, f"{model} (provider {provider} has a credential)"))
    else:
        checks.append(Check(
            "default model", False,
            f"{model}: provider {provider!r} has no credential (connected: {', '.join(connected) or 'none'}); "
            "prompts would be admitted and then silently do nothing",
            f"give opencode a credential for {provider} (`opencode auth login`, or its API key in the serve's "
            "environment), or set `model` in opencode.json to a connected provider's model"))


def clock_check(local: float, db_skew: float | None, upstream_skew: float | None) -> Check:
    if local < 1_700_000_000:  # before November 2023: the clock was never set
        return Check("clock", False, f"this host's clock says {time.ctime(local)}",
                     "enable NTP (timedatectl set-ntp true)")
    skews = []
    if db_skew is not None:
        skews.append(("database", db_skew))
    if upstream_skew is not None:
        skews.append(("upstream", upstream_skew))
    detail = ", ".join(f"{name} {delta:+.2f} s" for name, delta in skews) or "nothing to compare with"
    # The upstream's Date header has 1 s resolution.
    bad = [name for name, delta in skews if abs(delta) > MAX_CLOCK_SKEW_S + (1 if name == "upstream" else 0)]
    if bad:
        return Check("clock", False, f"skew vs this host: {detail}",
                     f"synchronise the clocks of this host and the {' and '.join(bad)} (NTP); event times "
                     "and lag metrics compare them")
    return Check("clock", True, f"in sync ({detail})")
