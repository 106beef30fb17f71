"""The command door as the daemon builds it and every transport enters it (docs/commands.md): `build_door`
wires the executor from the settings (the writers' pool: a command writes its row before and after the
upstream call), `run_command` runs one command from any transport — the HTTP routes (bridge.http.commands)
and the WebSocket `command` op (bridge.fanout.command_op) are its two thin adapters."""

from __future__ import annotations

from collections.abc import Awaitable

import structlog
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import Claims
from bridge.command_service.questions import QuestionCommands
from bridge.command_service.rows import DoorStore
from bridge.command_service.service import CommandService, DoorSettings, Outcome
from bridge.commands.model import CommandError, parse_command
from bridge.config import Settings
from bridge.directories import realpath
from bridge.errors import error_body
from bridge.log import correlation_id
from bridge.store.chat_sessions import tree
from bridge.store.commands_pending import PendingStore, PromptQueueStore
from bridge.upstream.client import UpstreamClient
from bridge.upstream.commands import UpstreamCommands
from bridge.upstream.gen2.commands import Gen2Commands
from bridge.upstream.gen2.requests import Gen2Requests
from bridge.upstream.requests import UpstreamRequests

_log = structlog.get_logger("bridge.commands")


def build_door(settings: Settings, engine: AsyncEngine, client: UpstreamClient, generation: int = 1) -> CommandService:
    """The daemon's command door, making the calls of the serve's generation (docs/upstream.md §24)."""
    name = settings.upstream_name
    upstream = Gen2Commands(client) if generation == 2 else UpstreamCommands(client)
    requests = Gen2Requests(client) if generation == 2 else UpstreamRequests(client)

    def widen(claims: Claims, session_id: str) -> Awaitable[Claims]:
        return tree.widen(claims, engine, name, session_id)

    questions = QuestionCommands(PendingStore(engine, name), requests)
    return CommandService(DoorStore(engine, name), upstream,
                          DoorSettings(directories=settings.directory_roots, resolve=realpath,
                                       prompt_runtime=settings.prompt_runtime),
                          queue=PromptQueueStore(engine, name), questions=questions, widen=widen)


async def run_command(service: CommandService, claims: Claims, name: str, body: object,
                      session_id: str | None = None, request_id: str | None = None) -> Outcome:
    """One command from any transport: an Outcome, errors included, never an exception for a refused
    command (nor for a database that did not answer: a 503 to retry)."""
    try:
        cmd = parse_command(name, body, session_id, request_id)
        return await service.execute(claims, cmd)
    except CommandError as e:
        # Refused before or after its row was written; never the body (prompt text) or the token.
        _log.info("command_refused", command=name, session_id=session_id, subject=claims.subject,
                  scope=claims.scope, error=e.code)
        return Outcome(e.status, e.body())
    except (SQLAlchemyError, OSError) as e:
        ref = correlation_id()
        _log.warning("command_store_failed", command=name, correlation_id=ref, error=f"{type(e).__name__}: {e}"[:300])
        return Outcome(503, error_body("upstream_unavailable",
                                       f"the database did not answer, retry (correlation id {ref})", ref))
