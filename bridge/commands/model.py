"""Commands a client sends through the bridge (docs/commands.md), pure: body validation, the scope
matrix, the fingerprint that tells a retry from a reuse, and the upstream ids derived from a command.

No I/O and no clock of its own: the caller passes the time where an id needs one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bridge.auth import SCOPES
from bridge.commands.attachments import AttachmentError, parse_files
from bridge.commands.session_ops import SESSION_OP_SCOPES, session_op_args
from bridge.directories import path_problem
from bridge.errors import BridgeError, error_body
from bridge.ids import SESSION_ID_RULE, valid_command_id, valid_name, valid_session_id

# --- bounds (docs/operations.md, "Limits") -------------------------------------------------------------
MAX_BODY_BYTES = 64 * 1024  # as a WebSocket client frame
# A prompt over HTTP may carry attachments as data: URLs (10 MiB decoded, bridge.commands.attachments).
MAX_PROMPT_BODY_BYTES = 14 * 1024 * 1024 + MAX_BODY_BYTES
MAX_COMMAND_ID = 100
MAX_TEXT_CHARS = 32_000
MAX_DIRECTORY_CHARS = 4096
MAX_REASON_CHARS = 1000  # an erasure's reason, kept in its tombstone
MAX_NAME_CHARS = 200  # provider, model, agent, permission request ids

_RANK = {scope: n for n, scope in enumerate(SCOPES)}

# Which scope each command needs: `prompt` may talk and answer permissions and questions, `control` may
# also stop a turn, switch model or agent and create sessions. Answering a permission also needs the
# token's `approve` right (bridge.auth.APPROVALS, `approval_problem` below; docs/security.md); answering
# a question does not (a clarification is talk, not an approval).
REQUIRED_SCOPE: dict[str, str] = {
    "prompt": "prompt",
    "permission_reply": "prompt",
    "question_reply": "prompt",
    "question_reject": "prompt",
    "interrupt": "control",
    "model": "control",
    "agent": "control",
    "create_session": "control",
    "erase": "control",  # DELETE /v1/sessions/{id}/mirror (docs/lifecycle.md, "Erasure")
    **SESSION_OP_SCOPES,  # title, revert, unrevert, fork, slash_command (bridge.commands.session_ops)
}
DELIVERIES = ("steer", "queue")
REPLIES = ("once", "always", "reject")


class CommandError(BridgeError):
    """A refused command; `code` is the stable error code of docs/commands.md, `status` its HTTP status."""

    STATUS = {"bad_request": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404, "conflict": 409,
              "model_unavailable": 422, "bad_file": 422, "rate_limited": 429, "upstream_unavailable": 503}

    def __init__(self, code: str, message: str, correlation_id: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.correlation_id = correlation_id  # the log line with the details carries the same id
        self.retry_after = retry_after  # seconds, for rate_limited

    def body(self) -> dict[str, Any]:
        """The error envelope (bridge.errors.error_body; docs/errors.md)."""
        return error_body(self.code, self.message, self.correlation_id, self.retry_after)

    @property
    def status(self) -> int:
        return self.STATUS.get(self.code, 500)


@dataclass(frozen=True)
class Command:
    """A validated command. `args` is canonical (only the fields that mean something, typed), so the same
    request always has the same fingerprint whatever extra keys or key order the client sent."""

    name: str
    command_id: str
    session_id: str | None  # None only for create_session
    args: Mapping[str, Any]

    @property
    def fingerprint(self) -> str:
        canon = json.dumps({"c": self.name, "s": self.session_id, "a": dict(self.args)}, sort_keys=True,
                           ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()


def scope_allows(scope: str, command: str) -> bool:
    need = REQUIRED_SCOPE.get(command)
    return need is not None and _RANK.get(scope, -1) >= _RANK[need]


def approval_problem(reply: str, approve: str, limited: bool) -> str | None:
    """Why a token with this `approve` right (and limited to sessions or not) may not send `reply`.
    `reject` needs no approval right: refusing a tool never lets the agent do more."""
    if reply == "always" and (approve != "always" or limited):
        return "answering always needs a token with approve=always, not limited to sessions"
    if reply == "once" and approve not in ("once", "always"):
        return "answering once needs a token with approve=once or always"
    return None


def _bad(message: str) -> CommandError:
    return CommandError("bad_request", message)


def _string(body: Mapping[str, Any], key: str, max_chars: int, *, required: bool = True) -> str | None:
    v = body.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not 1 <= len(v) <= max_chars:
        raise _bad(f"{key} must be a string of 1 to {max_chars} characters")
    if "\x00" in v:  # PostgreSQL text cannot hold NUL
        raise _bad(f"{key} must not contain NUL")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(f"{key} must be UTF-8 text") from None
    return v


def _name(body: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    v = _string(body, key, MAX_NAME_CHARS, required=required)
    # Names end up in upstream paths and logs: printable ASCII without separators or spaces.
    if v is not None and not valid_name(v):
        raise _bad(f"{key} must be printable ASCII without '/', '?', '#', '%', '\\' or spaces")
    return v


def _choice(body: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    v = body.get(key)
    if v not in allowed:
        # No default: the upstream silently takes `steer` when `delivery` is missing (docs/upstream.md §4.1).
        raise _bad(f"{key} is required and must be one of {', '.join(allowed)}")
    assert isinstance(v, str)
    return v


def _session(session_id: str | None) -> str:
    if not valid_session_id(session_id):
        raise _bad(SESSION_ID_RULE)
    assert session_id is not None
    return session_id


def parse_command(name: str, body: object, session_id: str | None = None,
                  request_id: str | None = None) -> Command:
    """The command `name` from a decoded JSON body; `session_id`/`request_id` come from the path."""
    if name not in REQUIRED_SCOPE:
        raise _bad(f"unknown command {name[:40]!r}")
    if not isinstance(body, dict):
        raise _bad("the body is a JSON object")
    command_id = _string(body, "command_id", MAX_COMMAND_ID)
    if not valid_command_id(command_id):  # no CR, LF, ESC: ids end up in log lines (bridge.ids)
        raise _bad(f"command_id must be 1 to {MAX_COMMAND_ID} printable ASCII characters without surrounding "
                   "spaces")
    assert command_id is not None
    if name == "create_session":
        return _stored(Command(name, command_id, None, _create_session_args(body)))
    sid = _session(session_id)
    return _stored(Command(name, command_id, sid, _session_command_args(name, body, request_id)))


def _create_session_args(body: Mapping[str, Any]) -> dict[str, Any]:
    directory = _string(body, "directory", MAX_DIRECTORY_CHARS)
    assert directory is not None
    problem = path_problem(directory)  # the allow-list is the service's (bridge.directories)
    if problem is not None:
        raise _bad(f"directory: {problem}")
    args: dict[str, Any] = {"directory": directory}
    provider, model = _create_model(body)
    if provider is not None:
        args.update(provider_id=provider, model_id=model)
    agent = _name(body, "agent", required=False)
    if agent is not None:
        args["agent"] = agent
    return args


def _prompt_args(body: Mapping[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {"text": _string(body, "text", MAX_TEXT_CHARS),
                            "delivery": _choice(body, "delivery", DELIVERIES)}
    if body.get("files") is not None:  # absent and [] mean the same: no `files` key, same fingerprint
        try:
            files = parse_files(body["files"])
        except AttachmentError as e:
            raise _bad(str(e)) from None
        if files:
            args["files"] = files
    return args


def _flag(body: Mapping[str, Any], key: str) -> dict[str, Any]:
    """An optional boolean kept only when true (absent and false mean the same: same fingerprint)."""
    if body.get(key) is not None and not isinstance(body[key], bool):
        raise _bad(f"{key} must be true or false")
    return {key: True} if body.get(key) else {}


def _session_command_args(name: str, body: Mapping[str, Any], request_id: str | None) -> dict[str, Any]:
    """The arguments of a command on one session (its id checked by the caller)."""
    if name == "prompt":
        return _prompt_args(body)
    if name == "model":
        return {"provider_id": _name(body, "provider_id"), "model_id": _name(body, "model_id")}
    if name == "agent":
        return {"agent": _name(body, "agent")}
    if name == "interrupt":
        return _flag(body, "drop_queued")
    if name == "permission_reply":
        return {"request_id": _name({"request_id": request_id}, "request_id"),
                "reply": _choice(body, "reply", REPLIES)}
    if name in ("question_reply", "question_reject"):
        args: dict[str, Any] = {"request_id": _name({"request_id": request_id}, "request_id")}
        if name == "question_reply":
            args["answers"] = _answers(body)
        return args
    if name == "erase":
        return {"reason": _string(body, "reason", MAX_REASON_CHARS), **_flag(body, "upstream")}
    if name in SESSION_OP_SCOPES:
        return dict(session_op_args(name, body, _string, _name))
    return {}


def _stored(cmd: Command) -> Command:
    """`cmd`, if its arguments can be stored: its row keeps them as jsonb, which cannot hold NUL."""
    if _holds_nul(dict(cmd.args)):
        raise _bad("no field may contain NUL")
    return cmd


MAX_ANSWERS = 50  # questions in one request, and choices in one answer


def _answers(body: Mapping[str, Any]) -> list[Any]:
    """The shape only (a list of lists, bounded); what each entry may be depends on the question, checked
    against it when it is known (bridge.command_service.questions). No text anywhere in it may hold NUL: the
    answers are stored (jsonb cannot hold `\\u0000`) before the question is looked at."""
    v = body.get("answers")
    if not isinstance(v, list) or not 1 <= len(v) <= MAX_ANSWERS or not all(
            isinstance(a, list) and len(a) <= MAX_ANSWERS for a in v):
        raise _bad(f"answers must be a list of 1 to {MAX_ANSWERS} lists, one per question")
    if _holds_nul(v):
        raise _bad("answers must not contain NUL")
    return v


def _holds_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    return False


def _create_model(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """`model` as `"provider/model"` or `{provider_id, model_id}`, or `provider_id` + `model_id` at the top."""
    raw = body.get("model")
    if isinstance(raw, str) and "/" in raw:
        provider_s, _, model_s = raw.partition("/")
        raw = {"provider_id": provider_s, "model_id": model_s}
    source = raw if isinstance(raw, dict) else body
    if raw is not None and source is body:
        raise _bad("model is 'provider/model' or {provider_id, model_id}")
    provider, model = _name(source, "provider_id", required=False), _name(source, "model_id", required=False)
    if (provider is None) != (model is None):
        raise _bad("provider_id and model_id go together")
    return provider, model


# --- ids derived from a command (docs/commands.md, "Exactly once") ----------------------------------------

_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _digest62(upstream: str, scope: str, command_id: str, n: int = 14) -> str:
    h = int.from_bytes(hashlib.sha256(f"{upstream}\x00{scope}\x00{command_id}".encode()).digest(), "big")
    out = []
    for _ in range(n):
        h, r = divmod(h, 62)
        out.append(_B62[r])
    return "".join(out)


def upstream_message_id(upstream: str, session_id: str, command_id: str, now_ms: int, subject: str) -> str:
    """`msg_` + 12 hex of opencode's ascending time stamp + 14 base62 of a hash of the command: the shape of
    the serve's own ids (`msg_22a47d535001o65INCu84jsLQJ`), so messages keep sorting by time. The time is
    the first attempt's: it is stored with the pending row, and every retry re-sends the stored id. The
    subject is hashed in: command ids are per subject (docs/security.md), so are the ids derived from them."""
    return "msg_" + format((now_ms * 0x1000) % 2**48, "012x") + _digest62(upstream, f"{session_id}\x00{subject}",
                                                                          command_id)


def v2_prompt_message_id(upstream: str, session_id: str, command_id: str, subject: str) -> str:
    """The message id of a v2 prompt: a pure function of what a retry repeats (upstream, target session,
    subject, command_id), so the serve's own check (same id, same body: the same admission, docs/upstream.md
    §17) refuses a duplicate even when our `chat_commands` row was lost and the mirror has not re-read the
    admission yet (docs/commands.md, "Exactly once"). Same shape as `upstream_message_id` and the same
    digest at the end; the 12 hex where the time would be are hashed too. The v2 runtime orders a session's
    prompts and messages by admission seq, never by id (docs/upstream.md §17), so they need no time."""
    digest = _digest62(upstream, f"{session_id}\x00{subject}", command_id)
    stamp = hashlib.sha256(f"{upstream}\x00{session_id}\x00{subject}\x00{command_id}\x00v2".encode()).hexdigest()
    return "msg_" + stamp[:12] + digest


def upstream_session_id(upstream: str, command_id: str, now_ms: int, subject: str) -> str:
    """`ses_` + opencode's descending time stamp (newest sorts first) + a hash of the command and its subject."""
    return "ses_" + format(~(now_ms * 0x1000) % 2**48, "012x") + _digest62(upstream, f"session\x00{subject}",
                                                                           command_id)
