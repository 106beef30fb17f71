"""Runs a command exactly once (docs/commands.md): authorize, rate-limit, store the row as `pending`, call
the upstream, store the result. A retry of the same `command_id` gets the stored result; a `pending` row
(a crash or an upstream outage between the call and the commit) is sent again with the id derived at its
first attempt, which the upstream dedupes for prompts and session creation (docs/upstream.md §17); the
other commands are idempotent upstream (interrupt, model, agent) or checked first (permission replies)."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from bridge import metrics
from bridge.auth import Claims
from bridge.command_service.admission import authorize, placed
from bridge.command_service.directory import directory_of
from bridge.command_service.erase import run_erase
from bridge.command_service.message_ids import MessageIds
from bridge.command_service.model_check import ModelCheck
from bridge.command_service.permission_reply import reply_where_pending
from bridge.command_service.prompt_router import PromptRouter
from bridge.command_service.questions import QuestionCommands
from bridge.command_service.rows import DoorRows
from bridge.commands.model import Command, CommandError
from bridge.commands.ratelimit import RateLimiter
from bridge.commands.session_ops import SESSION_OP_SCOPES, result_body, route
from bridge.errors import InvalidRequest, SessionNotFound, UpstreamError
from bridge.log import correlation_id
from bridge.store.ports.commands import CommandKey, CommandRow
from bridge.store.ports.prompt_queue import PromptQueuePort
from bridge.upstream.commands import UpstreamCommands

_log = structlog.get_logger("bridge.commands")

# Test-only (docs/commands.md, "Testing the crash window"): the process exits right after the upstream
# answered the command with this id, before the result is committed: a crash in the worst place.
EXIT_AFTER_UPSTREAM_ENV = "BRIDGE_TEST_EXIT_AFTER_UPSTREAM_COMMAND"


@dataclass(frozen=True)
class Outcome:
    status: int
    body: dict[str, Any]


@dataclass(frozen=True)
class _Target:
    sid: str
    directory: str
    info: dict[str, Any]  # GET /api/session/{id}, read once per command


@dataclass(frozen=True)
class _Done:
    status: int
    body: dict[str, Any]
    upstream_status: int | None = None
    admitted_seq: int | None = None


def _generic(code: str, message: str, cause: Exception) -> CommandError:
    """A client-facing error without the upstream's details (URLs, status texts): those go to the log
    line carrying the same correlation id (docs/security.md, "Errors")."""
    ref = correlation_id()
    _log.warning("command_upstream_error", correlation_id=ref, error=f"{type(cause).__name__}: {cause}"[:500])
    return CommandError(code, f"{message} (correlation id {ref})", ref)


def rate_key(claims: Claims) -> str:
    """One bucket per token: its `jti` (every token has one, bridge.auth)."""
    return claims.jti or claims.subject


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class DoorSettings:
    """How the command door is set up (the daemon's from bridge.config.Settings; tests pick theirs)."""

    # BRIDGE_ALLOWED_DIRECTORIES (empty: no session creation) and the symlink resolver (daemon: realpath)
    directories: tuple[str, ...] = ()
    resolve: Callable[[str], str] | None = None
    prompt_runtime: str = "auto"  # BRIDGE_PROMPT_RUNTIME (docs/commands.md, "Runtime affinity")
    exit_after_upstream: str | None = None  # None: from EXIT_AFTER_UPSTREAM_ENV
    clock: Callable[[], float] = time.monotonic
    now_ms: Callable[[], int] = _now_ms


class CommandService:
    def __init__(self, store: DoorRows, upstream: UpstreamCommands, settings: DoorSettings = DoorSettings(), *,
                 queue: PromptQueuePort, limiter: RateLimiter | None = None, questions: QuestionCommands | None = None,
                 widen: Callable[[Claims, str], Awaitable[Claims]] | None = None) -> None:
        self.store = store
        self.widen = widen  # a parent's token also grants its subagents' sessions (bridge.store.chat_sessions.tree)
        self.questions = questions
        self.settings = settings
        self.upstream = upstream
        self.limiter = limiter or RateLimiter(clock=settings.clock)
        self._ids = MessageIds(store, settings.now_ms)
        self._exit_after = settings.exit_after_upstream if settings.exit_after_upstream is not None \
            else os.environ.get(EXIT_AFTER_UPSTREAM_ENV) or None
        self._model_check = ModelCheck(upstream, settings.clock)
        # Prompts on both runtimes (docs/commands.md, "Runtime affinity"): legacy sends, queue, attachments.
        self.prompts = PromptRouter(queue, upstream,
                                    settings.prompt_runtime, exit_after=self._exit_after)

    async def execute(self, claims: Claims, cmd: Command) -> Outcome:
        if self.widen is not None and cmd.session_id is not None and not claims.allows(cmd.session_id):
            claims = await self.widen(claims, cmd.session_id)
        authorize(claims, cmd)
        cmd = placed(cmd, self.settings.directories, self.settings.resolve)
        wait = self.limiter.take(rate_key(claims))
        if wait > 0:
            raise CommandError("rate_limited", f"too many commands, retry in {wait:.1f} s",
                               retry_after=round(max(wait, 0.1), 1))
        if cmd.session_id is not None and cmd.name != "erase" and await self.store.tombstoned(cmd.session_id):
            raise CommandError("not_found", "the session was erased")  # before its row: nothing of it is kept
        upstream_id = self._ids.derive(cmd, claims.subject)
        sid = cmd.session_id if cmd.name != "create_session" else upstream_id
        row, fresh = await self.store.claim(cmd, claims.subject, claims.scope, upstream_id, sid)
        if fresh and cmd.name == "prompt" and upstream_id is not None and cmd.session_id is not None:
            # A row lost with a failover (docs/scaling.md): the first attempt's id, if the mirror has it.
            earlier = await self.store.earlier_message_id(cmd.session_id, upstream_id)
            if earlier is not None:
                _log.warning("command_row_recovered", command_id=cmd.command_id, message_id=earlier)
                row = await self.store.use_upstream_id(cmd, claims.subject, row, earlier)
        if not fresh:
            if row.fingerprint != cmd.fingerprint:
                raise CommandError("conflict", "command_id was already used for another command")
            if row.state != "pending" and row.http_status is not None and row.result is not None:
                return Outcome(row.http_status, row.result)
        return await self._run_and_store(claims, cmd, row)

    async def _run_and_store(self, claims: Claims, cmd: Command, row: CommandRow) -> Outcome:
        log = _log.bind(command=cmd.name, command_id=cmd.command_id, session_id=row.session_id,
                        subject=claims.subject)
        try:
            done = await self._run(cmd, row)
        except CommandError as e:
            log.info("command_failed", error=e.code)
            if e.code != "upstream_unavailable":  # kept pending: a retry sends it again, idempotently
                await self.store.complete(CommandKey.of(cmd, claims.subject), state="failed", http_status=e.status,
                                          result=e.body())
            raise
        if self._exit_after is not None and self._exit_after == cmd.command_id:
            os._exit(99)  # test hook, see EXIT_AFTER_UPSTREAM_ENV
        key = CommandKey.of(cmd, claims.subject)
        await self.store.complete(key, state="done", http_status=done.status, result=done.body,
                                  upstream_status=done.upstream_status, admitted_seq=done.admitted_seq)
        log.info("command_done", status=done.status, upstream_status=done.upstream_status)
        return Outcome(done.status, done.body)

    async def _run(self, cmd: Command, row: CommandRow) -> _Done:
        try:
            if cmd.name == "create_session":
                return await self._create(cmd, row)
            assert cmd.session_id is not None
            if cmd.name == "erase":  # the mirror's, whether or not the serve still has the session
                return await self._erase(cmd, row)
            target = await self._target(cmd.session_id)
            return await self._HANDLERS[cmd.name](self, cmd, target, row)
        except SessionNotFound:
            raise CommandError("not_found", "no such session upstream") from None
        except InvalidRequest as e:
            raise _generic("bad_request", "the upstream refused the command", e) from None
        except UpstreamError as e:
            if e.status == 409:
                raise CommandError("conflict", "the upstream holds another message with this id") from None
            raise _generic("upstream_unavailable", "the upstream did not take the command", e) from None

    async def _target(self, session_id: str) -> _Target:
        mirrored = await self.store.session(session_id)
        if mirrored is not None and mirrored.deleted:
            raise CommandError("not_found", "the session was deleted")
        info = await self.upstream.session(session_id)  # 404 → not_found; also proves it exists now
        directory = directory_of(info, mirrored)
        if directory is not None:
            return _Target(session_id, directory, info)
        raise CommandError("upstream_unavailable", "the upstream did not say where the session lives")

    async def _erase(self, cmd: Command, row: CommandRow) -> _Done:
        """bridge.command_service.erase: the mirror first, then (asked for) the serve."""
        assert cmd.session_id is not None
        mirrored = await self.store.session(cmd.session_id)
        status, body = await run_erase(self.store, self.upstream, cmd, row.subject,
                                       directory_of(None, mirrored))
        return _Done(200, body, status)

    async def _create(self, cmd: Command, row: CommandRow) -> _Done:
        a = cmd.args
        assert row.upstream_id is not None
        model = {"providerID": a["provider_id"], "id": a["model_id"]} if "provider_id" in a else None
        data = await self.upstream.create_session(row.upstream_id, a["directory"], model, a.get("agent"))
        return _Done(201, {"command_id": cmd.command_id, "session_id": data.get("id", row.upstream_id),
                           "directory": directory_of(data) or a["directory"]}, 200)

    async def _prompt(self, cmd: Command, t: _Target, row: CommandRow) -> _Done:
        assert row.upstream_id is not None
        key = CommandKey.of(cmd, row.subject)
        choice, resolved = await self.prompts.prepare(cmd, key, t.sid, t.directory)
        await self._model_check.check(t.info, t.directory)
        if choice.runtime == "legacy":
            stamped = await self._ids.legacy_stamped(cmd, row)
            assert stamped.upstream_id is not None
            status, body = await self.prompts.legacy(cmd, key, t.sid, t.directory, t.info, stamped.upstream_id,
                                                     choice)
            return _Done(status, body)
        text, files = self.prompts.v2_prompt(cmd, resolved)
        status, data = await self.upstream.prompt(t.sid, t.directory, row.upstream_id, text, cmd.args["delivery"],
                                                  files)
        seq = data.get("admittedSeq")
        seq = seq if isinstance(seq, int) else None
        metrics.PROMPTS.labels(runtime="v2", outcome="sent").inc()
        return _Done(200, {"command_id": cmd.command_id, "message_id": data.get("id", row.upstream_id),
                           "admitted_seq": seq, "delivery": cmd.args["delivery"],
                           **self.prompts.choice_fields(choice)}, status, seq)

    async def _interrupt(self, cmd: Command, t: _Target, row: CommandRow) -> _Done:
        sid, directory = t.sid, t.directory
        dropped = await self.prompts.drop_queued(sid, "interrupt") if cmd.args.get("drop_queued") else []
        status = await self.upstream.interrupt(sid, directory)
        # The v2 interrupt leaves a legacy-driven (TUI) turn running (checked on 1.18.33, docs/commands.md).
        legacy = await self.upstream.legacy_busy(sid, directory)
        if legacy:
            await self.upstream.legacy_abort(sid, directory)
        body = {"command_id": cmd.command_id, "session_id": sid, "legacy_aborted": legacy}
        if cmd.args.get("drop_queued"):
            body["dropped"] = dropped  # queued legacy prompts never sent (kept otherwise)
        return _Done(200, body, status)

    async def _model(self, cmd: Command, t: _Target, row: CommandRow) -> _Done:
        a = cmd.args
        status = await self.upstream.switch_model(t.sid, t.directory, a["provider_id"], a["model_id"])
        return _Done(200, {"command_id": cmd.command_id, "session_id": t.sid, "provider_id": a["provider_id"],
                           "model_id": a["model_id"]}, status)

    async def _agent(self, cmd: Command, t: _Target, row: CommandRow) -> _Done:
        status = await self.upstream.switch_agent(t.sid, t.directory, cmd.args["agent"])
        return _Done(200, {"command_id": cmd.command_id, "session_id": t.sid, "agent": cmd.args["agent"]}, status)

    async def _permission(self, cmd: Command, t: _Target, row: CommandRow) -> _Done:
        """The runtime is where the request is pending upstream: the v2 per-session list, else the legacy
        `GET /permission` (each lists only its own, docs/upstream.md §4.4, §16)."""
        sid, directory = t.sid, t.directory
        rid, reply = cmd.args["request_id"], cmd.args["reply"]
        body = {"command_id": cmd.command_id, "session_id": sid, "request_id": rid, "reply": reply}
        applied = await reply_where_pending(self.upstream, sid, directory, rid, reply)
        if applied is not None:
            runtime, status = applied
            await self._answered_by(rid, row.subject)
            return _Done(200, {**body, "runtime": runtime, "applied": True}, status)
        known = await self.store.permission_reply(rid)
        if known is not None and known[0] == sid and known[1] is not None:
            return _Done(200, {**body, "reply": known[1], "applied": False})
        raise CommandError("not_found", "no such pending permission request in this session")

    async def _answered_by(self, request_id: str, subject: str) -> None:
        if self.questions is not None:  # the pending-requests table: who answered
            await self.questions.answered_by(request_id, subject)

    async def _question(self, cmd: Command, t: _Target, row: CommandRow) -> _Done:
        """`question_reply` / `question_reject` (bridge.command_service.questions)."""
        if self.questions is None:
            raise CommandError("not_found", "questions are not answered here")
        done = await self.questions.run(cmd.name, cmd.command_id, t.sid, t.directory, dict(cmd.args), row.subject)
        return _Done(done.status, done.body, done.upstream_status)

    async def _session_op(self, cmd: Command, t: _Target, row: CommandRow) -> _Done:
        """title, revert, unrevert, fork, slash command (bridge.commands.session_ops)."""
        if cmd.name == "slash_command":  # the serve answers an unknown one with a 500: say what it is
            listed = await self.upstream.slash_commands(t.directory)
            if not any(c.get("name") == cmd.args["command"] for c in listed):
                raise CommandError("not_found", "no such slash command for the session's directory "
                                                "(GET /v1/commands?session=…)")
        method, tail, body = route(cmd.name, cmd.args, row.upstream_id)
        status, got = await self.upstream.session_op(t.sid, t.directory, method, tail, body)
        return _Done(200, result_body(cmd.name, cmd.command_id, t.sid, {**cmd.args, "upstream_message_id":
                                      row.upstream_id}, got), status)

    _HANDLERS: dict[str, Callable[[CommandService, Command, _Target, CommandRow], Awaitable[_Done]]] = {
        "prompt": _prompt, "interrupt": _interrupt, "model": _model, "agent": _agent,
        "permission_reply": _permission, "question_reply": _question, "question_reject": _question,
        **dict.fromkeys(SESSION_OP_SCOPES, _session_op),
    }
