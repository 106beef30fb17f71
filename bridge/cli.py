"""`opencode-bridge` command line: run | migrate | map | token | doctor | sessions | events | transcript |
export | verify | erase | archive | retention | partition-migrate."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence

import structlog

from bridge import __version__
from bridge.config import Settings, load_settings
from bridge.errors import ConfigError
from bridge.log import configure_logging


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opencode-bridge", description=__doc__)
    p.add_argument("--version", action="version", version=f"opencode-bridge {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="run the daemon (applies pending migrations first)")
    sub.add_parser("migrate", help="apply pending migrations and exit")
    m = sub.add_parser("map", help="print the normalized events of a captured .sse stream or sync log (offline)")
    m.add_argument("file")
    t = sub.add_parser("token", help="print an access token for the WebSocket and audit API")
    t.add_argument("--session", action="append", default=None, metavar="ID",
                   help="grant this session (repeatable); none: every session of the upstream")
    t.add_argument("--ttl", type=float, default=3600.0, metavar="SECONDS", help="lifetime (default 3600)")
    t.add_argument("--subject", default=None, help="who the token is for (kept in the token and in every command "
                   "row, logged on use); required for prompt and control")
    t.add_argument("--scope", choices=("read", "prompt", "control"), default="read",
                   help="read (default): watch and audit; prompt: also send prompts; control: also interrupt, "
                        "switch model or agent, create sessions (docs/commands.md, docs/security.md)")
    t.add_argument("--approve", choices=("none", "once", "always"), default=None,
                   help="answering permission requests: once (default for prompt and control: once or reject), "
                        "always (also `always`; not with --session), none (docs/security.md)")
    t.add_argument("--revoke", metavar="JTI", default=None,
                   help="revoke the token with this jti (printed on stderr when it was minted) and exit")
    t.add_argument("--reason", default="", help="with --revoke: why (kept with the revocation)")
    sub.add_parser("doctor", help="check database, migrations, upstream, credentials and clock; explain fixes")
    from bridge.audit.cli import add_parsers as add_audit_parsers

    add_audit_parsers(sub)  # sessions | events | transcript | export | verify (docs/audit.md)
    from bridge.lifecycle.cli import add_parsers as add_lifecycle_parsers

    add_lifecycle_parsers(sub)  # erase | archive | retention | partition-migrate (docs/lifecycle.md)
    return p


def _database_url(settings: Settings) -> tuple[str, object | None]:
    """The configured URL, or an embedded PostgreSQL under the state dir."""
    if not settings.embedded_database:
        return settings.database_url.value, None
    from bridge.store.embedded import start_embedded

    settings.state_dir.mkdir(parents=True, exist_ok=True)
    pg = start_embedded(settings.state_dir.resolve())
    return pg.url, pg


async def _run(settings: Settings, url: str) -> int:
    from bridge.daemon import Daemon, install_signal_handlers
    from bridge.workers.child import WorkerContext

    worker = WorkerContext.from_env()
    if worker is not None:
        worker.die_with_parent()
        structlog.contextvars.bind_contextvars(worker=worker.index)  # every line says which worker
    daemon = Daemon(settings, url, worker)
    install_signal_handlers(daemon)
    return await daemon.run()


def _token(settings: Settings, sessions: list[str] | None, ttl: float, subject: str | None, scope: str = "read",
           approve: str | None = None) -> int:
    from bridge.auth import MAX_TTL_S, claim_problem, default_approve, load_or_create_secret, mint_token, new_jti
    from bridge.ids import SESSION_ID_RULE, valid_session_id

    if subject is not None and not subject.strip():
        print("opencode-bridge token: --subject must not be empty", file=sys.stderr)
        return 2
    problem = claim_problem(scope, subject or "", default_approve(scope) if approve is None else approve,
                            sessions is not None)
    if problem is not None:
        print(f"opencode-bridge token: {problem} (--subject, --approve, --session)", file=sys.stderr)
        return 2

    bad = [sid for sid in sessions or [] if not valid_session_id(sid)]
    if bad:
        print(f"opencode-bridge token: --session {bad[0]!r}: {SESSION_ID_RULE}", file=sys.stderr)
        return 2
    if not 0 < ttl <= MAX_TTL_S:
        print(f"opencode-bridge token: --ttl must be more than 0 and at most {MAX_TTL_S:.0f} (30 days)",
              file=sys.stderr)
        return 2
    secret = load_or_create_secret(settings.auth_secret.value, settings.state_dir)
    jti = new_jti()
    print(mint_token(secret, settings.upstream_name, sessions, ttl, subject or "", scope=scope, approve=approve,
                     jti=jti))
    print(f"jti {jti} (revoke: opencode-bridge token --revoke={jti})", file=sys.stderr)
    return 0


def _revoke(settings: Settings, jti: str, reason: str) -> int:
    from bridge.auth import MAX_JTI_CHARS, printable_id
    from bridge.store.db import make_engine, migrate_database
    from bridge.store.revoked import revoke

    if not printable_id(jti, MAX_JTI_CHARS):
        print(f"opencode-bridge token: --revoke takes a jti of 1 to {MAX_JTI_CHARS} printable characters",
              file=sys.stderr)
        return 2
    url, _embedded = _database_url(settings)

    async def run() -> bool:
        await migrate_database(url)  # the list's table exists even before the first `run`
        engine = make_engine(url, pool_size=1)
        try:
            return await revoke(engine, jti, reason)
        finally:
            await engine.dispose()

    fresh = asyncio.run(run())
    print(f"jti {jti} {'revoked' if fresh else 'was already revoked'}: refused everywhere within 5 s",
          file=sys.stderr)
    return 0


def _doctor(settings: Settings, url: str) -> int:
    from bridge.ops.doctor import render, run_doctor

    checks = asyncio.run(run_doctor(settings, url))
    sys.stdout.write(render(checks))
    return 0 if all(c.ok for c in checks) else 1


def _audit(args: argparse.Namespace, settings: Settings, url: str) -> int:
    from bridge.audit.cli import run as run_audit
    from bridge.store.db import make_engine
    from bridge.store.reads import AuditReader

    async def open_reader() -> tuple[AuditReader, Callable[[], Awaitable[None]]]:
        engine = make_engine(url, pool_size=2)
        return AuditReader(engine, settings.upstream_name), engine.dispose

    return run_audit(args, open_reader)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "map":
        from bridge.mapcli import run_map

        return run_map(args.file, sys.stdout)
    try:
        settings = load_settings()
    except ConfigError as e:
        print(f"opencode-bridge: configuration error: {e}", file=sys.stderr)
        return 2
    try:
        if args.command == "token" and args.revoke is not None:
            return _revoke(settings, args.revoke, args.reason)
        if args.command == "token":
            return _token(settings, args.session, args.ttl, args.subject, args.scope, args.approve)
        return _main(args, settings)
    except ConfigError as e:  # e.g. an unusable auth_secret file (bridge.auth.SecretFileError)
        print(f"opencode-bridge: configuration error: {e}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace, settings: Settings) -> int:
    configure_logging(settings.log_format, settings.log_level)
    log = structlog.get_logger("bridge")
    url, embedded = _database_url(settings)
    if embedded is not None:
        log.info("embedded_postgres", data_dir=str(settings.state_dir.resolve() / "pgdata"))
    if args.command == "doctor":
        return _doctor(settings, url)
    from bridge.audit.cli import COMMANDS as AUDIT_COMMANDS

    if args.command in AUDIT_COMMANDS:
        return _audit(args, settings, url)
    from bridge.lifecycle.cli import COMMANDS as LIFECYCLE_COMMANDS

    if args.command in LIFECYCLE_COMMANDS:
        from bridge.lifecycle.cli import run as run_lifecycle

        return run_lifecycle(args, settings, url)
    if args.command == "migrate":
        from bridge.store.db import migrate_database

        asyncio.run(migrate_database(url))
        log.info("migrations_applied")
        return 0
    log.info("bridge_config", **settings.redacted())
    if not settings.auth_disabled:  # an unusable secret file stops start-up here, with one line
        from bridge.auth import load_or_create_secret

        load_or_create_secret(settings.auth_secret.value, settings.state_dir)
    if settings.workers > 1:  # the parent of BRIDGE_WORKERS processes (docs/operations.md "Workers")
        from bridge.workers.run import run_parent

        return run_parent(settings, url)
    return asyncio.run(_run(settings, url))


if __name__ == "__main__":
    raise SystemExit(main())
