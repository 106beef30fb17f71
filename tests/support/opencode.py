"""``OpencodeServe``: a throw-away ``opencode serve`` (1.18.33) wired to the scripted mock provider.

Layout under ``root`` (one per test, e.g. ``tmp_path / "opencode"``)::

    home/.config/opencode/opencode.json   provider "mock" -> the MockLLM base URL
    project/                              git repo with hello.txt; the serve's cwd
    serve.log                             stdout+stderr of every start (appended across restarts)

Usage::

    serve = OpencodeServe(binary, tmp_path / "opencode", mock.base_url)
    await serve.start()
    try:
        sid = await serve.create_session()
        await serve.prompt(sid, "MOCK:text hi")
        events = await serve.wait_idle(sid)
    finally:
        await serve.close()

Everything listens on and talks to 127.0.0.1. See ``docs/upstream.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import aiohttp

from tests.support.waiting import wait_until

__all__ = [
    "STEP_END_TYPES",
    "OpencodeError",
    "OpencodeFactory",
    "OpencodeHTTPError",
    "OpencodeServe",
    "free_port",
    "opencode_config",
]

HOST = "127.0.0.1"
MODEL = "mock/mock-1"
PROMPT_ADMITTED = "session.next.prompt.admitted"
PROMPTED = "session.next.prompted"
STEP_END_TYPES = frozenset({"session.next.step.ended", "session.next.step.failed"})
GIT_IDENTITY = ("-c", "user.email=e2e@example.invalid", "-c", "user.name=e2e")

Delivery = Literal["steer", "queue"]


class OpencodeFactory(Protocol):
    """What the ``opencode_factory`` fixture hands out: make (and by default start) a serve."""

    async def __call__(self, *, name: str = ..., password: str | None = ..., username: str | None = ...,
                       start: bool = ...) -> OpencodeServe: ...


class OpencodeError(RuntimeError):
    """The serve failed to start, died, or misbehaved. The message ends with the tail of its log."""


class OpencodeHTTPError(OpencodeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:500]}")
        self.method, self.path, self.status, self.body = method, path, status, body


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the OS picks it; tiny race until the serve binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def opencode_config(mock_base_url: str) -> dict[str, Any]:
    """The ``opencode.json`` for a serve that talks only to the mock provider."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",  # bundled in 1.18.33: nothing is downloaded
                "name": "Mock",
                "options": {"baseURL": mock_base_url, "apiKey": "mock-key"},
                "models": {
                    # images in: an attached image reaches the model as an image part
                    "mock-1": {"name": "Mock 1", "tool_call": True, "attachment": True,
                               "modalities": {"input": ["text", "image"], "output": ["text"]},
                               "limit": {"context": 100_000, "output": 4096}},
                },
            },
        },
        "model": MODEL,
        "small_model": MODEL,
        "autoupdate": False,
        "share": "disabled",
        # everything allowed except `touch ...`, which asks (MOCK:perm uses it)
        "permission": {"bash": {"*": "allow", "touch *": "ask"}, "edit": "allow", "read": "allow"},
    }


# Seconds a closing serve gets after SIGTERM before SIGKILL (`OpencodeServe.close`).
CLOSE_GRACE_S = 2.0


class OpencodeServe:
    """One ``opencode serve`` process (restartable on the same port and HOME) plus a REST client."""

    def __init__(
        self,
        binary: str | os.PathLike[str],
        root: Path,
        mock_base_url: str,
        *,
        port: int | None = None,
        password: str | None = None,
        username: str | None = None,
        startup_timeout: float = 30.0,
        config_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.binary = Path(binary)
        self.root = root
        self.home = root / "home"
        self.project_dir = root / "project"
        self.log_path = root / "serve.log"
        self.mock_base_url = mock_base_url
        self.port = port if port is not None else free_port()
        self.password = password
        self.username = username
        self.startup_timeout = startup_timeout
        # config_overrides replaces top-level keys of the generated opencode.json
        self.config: dict[str, Any] = {**opencode_config(mock_base_url), **(config_overrides or {})}
        self._process: asyncio.subprocess.Process | None = None
        self._http: aiohttp.ClientSession | None = None
        self._prepared = False
        self.starts = 0

    # --- paths, environment ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    @property
    def auth_headers(self) -> dict[str, str]:
        """``Authorization`` for the serve's basic auth (empty without a password)."""
        if self.password is None:
            return {}
        return {"Authorization": aiohttp.encode_basic_auth(self.username or "opencode", self.password)}

    def environment(self) -> dict[str, str]:
        """The serve's environment: ours minus every OPENCODE_*/XDG_* variable, plus the test settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_", "XDG_"))}
        env.update(HOME=str(self.home), OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1")
        for name in ("NO_PROXY", "no_proxy"):  # never send the mock traffic through a proxy
            env[name] = ",".join(filter(None, [env.get(name), HOST, "localhost"]))
        if self.password is not None:
            env["OPENCODE_SERVER_PASSWORD"] = self.password
        if self.username is not None:
            env["OPENCODE_SERVER_USERNAME"] = self.username
        return env

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "<no serve log>"
        return "\n".join(text.splitlines()[-lines:])

    def _error(self, message: str) -> OpencodeError:
        return OpencodeError(f"{message}\n--- tail of {self.log_path} ---\n{self.log_tail()}")

    # --- preparation ----------------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Write the config and create the git project (once; restarts reuse both)."""
        if self._prepared:
            return
        self._write_config()
        await self.create_project(self.project_dir)
        self._prepared = True

    def _write_config(self) -> None:
        _write_file(self.home / ".config" / "opencode" / "opencode.json", json.dumps(self.config, indent=2))

    async def create_project(self, directory: Path, greeting: str | None = None) -> Path:
        """A git repo with a committed hello.txt (distinct content -> distinct opencode project id)."""
        _write_file(directory / "hello.txt", greeting or f"hello from {directory.name}\n")
        await _run("git", "init", "-q", cwd=directory)
        await _run("git", *GIT_IDENTITY, "add", ".", cwd=directory)
        await _run("git", *GIT_IDENTITY, "commit", "-qm", "init", cwd=directory)
        return directory

    # --- process lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the serve on ``self.port`` and wait until ``/api/health`` answers."""
        if self.running:
            raise OpencodeError("opencode serve is already running")
        await self.prepare()
        self.starts += 1
        log_fd = self._open_log(f"=== harness: start #{self.starts} on {HOST}:{self.port} ===\n")
        try:
            self._process = await asyncio.create_subprocess_exec(
                str(self.binary), "serve", "--hostname", HOST, "--port", str(self.port),
                "--print-logs", "--log-level", "INFO",
                cwd=self.project_dir, env=self.environment(), stdin=asyncio.subprocess.DEVNULL,
                stdout=log_fd, stderr=log_fd,
                start_new_session=True,  # own process group, so no terminal signal reaches it
                preexec_fn=_die_with_parent,
            )
        finally:
            os.close(log_fd)
        self._http = aiohttp.ClientSession(
            base_url=self.base_url, headers=self.auth_headers, timeout=aiohttp.ClientTimeout(total=30),
        )
        try:
            await wait_until(self._healthy, self.startup_timeout, 0.1,
                             message=f"GET {self.base_url}/api/health answers",
                             ignore=(aiohttp.ClientError, TimeoutError))
        except BaseException as exc:
            await self._terminate(signal.SIGKILL, timeout=5)
            if isinstance(exc, OpencodeError):
                raise
            if isinstance(exc, TimeoutError):
                raise self._error(f"opencode serve did not become healthy: {exc}") from exc
            raise

    def _open_log(self, banner: str) -> int:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, banner.encode())
        return fd

    async def _healthy(self) -> bool:
        process = self._process
        if process is None or process.returncode is not None:
            code = process.returncode if process is not None else None
            raise self._error(f"opencode serve exited during startup (exit code {code})")
        assert self._http is not None
        async with self._http.get("/api/health", timeout=aiohttp.ClientTimeout(total=2)) as response:
            return response.status == 200

    async def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``). Returns the exit code (None if not running)."""
        return await self._terminate(signal.SIGTERM, timeout)

    async def kill(self) -> int | None:
        """SIGKILL the serve: no chance to clean up, like a crash or an OOM kill."""
        return await self._terminate(signal.SIGKILL, timeout=10)

    async def restart(self, *, kill: bool = False) -> None:
        """Stop (or kill) and start again on the same port with the same HOME: history survives."""
        await (self.kill() if kill else self.stop())
        await self.start()

    async def close(self) -> None:
        """Stop the serve and release everything; safe to call more than once. A short grace: after a CLI
        turn the serve often ignores SIGTERM (it was killed after 10 s in every such teardown, a tenth of
        the e2e suite's time), and at teardown nothing is left to check of a graceful exit."""
        await self.stop(timeout=CLOSE_GRACE_S)

    async def __aenter__(self) -> OpencodeServe:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _terminate(self, sig: signal.Signals, timeout: float) -> int | None:
        process, self._process = self._process, None
        http, self._http = self._http, None
        if http is not None:
            await http.close()
        if process is None:
            return None
        pgid = process.pid  # start_new_session: the serve leads its own process group
        # opencode runs bash tool commands in process groups of their own: remember them before they
        # are orphaned, so a kill mid-tool leaves no `sleep` behind.
        leftovers = _descendants(process.pid)
        try:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(sig)
                try:
                    await asyncio.wait_for(process.wait(), timeout)
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    await process.wait()
        finally:
            # whatever the serve left behind (bash tool children such as `sleep`) goes too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            for leftover in leftovers:
                leftover.kill()
        return process.returncode

    # --- REST -----------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        expect: Sequence[int] = (200,),
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """One REST call; returns the parsed JSON body (None when empty). Other statuses raise."""
        if self._http is None:
            raise OpencodeError("opencode serve is not running")
        async with self._http.request(method, path, json=json_body, params=params,
                                      headers=headers) as response:
            text = await response.text()
            if response.status not in expect:
                raise OpencodeHTTPError(method, path, response.status, text)
            return json.loads(text) if text else None

    async def health(self) -> dict[str, Any]:
        body: dict[str, Any] = await self.request("GET", "/api/health")
        return body

    async def create_session(self, directory: Path | str | None = None) -> str:
        """``POST /api/session``; only the body places a session outside the serve's cwd."""
        body: dict[str, Any] = {}
        if directory is not None:
            body["location"] = {"directory": str(directory)}
        response = await self.request("POST", "/api/session", json_body=body)
        return str(response["data"]["id"])

    async def get_session(self, session_id: str) -> dict[str, Any]:
        response = await self.request("GET", f"/api/session/{session_id}")
        data: dict[str, Any] = response["data"]
        return data

    async def prompt(self, session_id: str, text: str, delivery: Delivery | None = None) -> dict[str, Any]:
        """``POST /api/session/{id}/prompt``; returns ``data`` (``admittedSeq``, ``id`` = message id, ...)."""
        body: dict[str, Any] = {"prompt": {"text": text}}
        if delivery is not None:
            body["delivery"] = delivery
        response = await self.request("POST", f"/api/session/{session_id}/prompt", json_body=body)
        data: dict[str, Any] = response["data"]
        return data

    async def history(self, session_id: str, after: int = 0, page_size: int = 100) -> list[dict[str, Any]]:
        """Every durable event with seq > ``after``, following ``hasMore`` across pages.

        The server accepts ``limit`` 1..100 (400 otherwise); ``after`` is exclusive.
        """
        events: list[dict[str, Any]] = []
        cursor = after
        while True:
            page = await self.request("GET", f"/api/session/{session_id}/history",
                                      params={"after": str(cursor), "limit": str(page_size)})
            data: list[dict[str, Any]] = page["data"]
            events.extend(data)
            if not page.get("hasMore"):
                return events
            if not data:
                raise OpencodeError(f"history of {session_id}: hasMore without events after {cursor}")
            cursor = int(data[-1]["durable"]["seq"])

    async def active(self) -> dict[str, Any]:
        """``GET /api/session/active`` -> ``{session_id: {"type": "running"}}`` (server-wide)."""
        response = await self.request("GET", "/api/session/active")
        data: dict[str, Any] = response["data"]
        return data

    async def wait_idle(
        self,
        session_id: str,
        timeout: float = 30.0,
        *,
        require_step_end: bool = True,
        interval: float = 0.1,
    ) -> list[dict[str, Any]]:
        """Wait until the session's newest prompt has been handled; return the full history then.

        There is no end-of-turn event and ``/api/session/active`` does not list a session until its
        turn has really started (1-2 s after the first prompt of a location), so "absent from active"
        alone is not enough. Idle means: the newest ``prompt.admitted`` (whoever sent it) has its
        ``prompted``, a ``step.ended``/``step.failed`` follows it, *and afterwards* the session is not
        in ``/api/session/active``. History is read before ``active`` so a turn that starts between the
        two reads cannot be mistaken for a finished one.

        ``require_step_end=False`` is for endings without a step end (provider stream cut, model
        unavailable, serve killed mid-turn): then ``prompted`` plus "not active" must hold on three
        consecutive polls.
        """
        streak = 0

        async def settled() -> bool:
            nonlocal streak
            events = await self.history(session_id)
            handled = _newest_prompt_handled(events, require_step_end)
            if handled and session_id not in await self.active():
                streak += 1
            else:
                streak = 0
            return streak >= (1 if require_step_end else 3)

        await wait_until(settled, timeout, interval, message=f"session {session_id} idle")
        return await self.history(session_id)

    async def list_sessions(self, page_size: int = 50, order: Literal["asc", "desc"] | None = None,
                            **filters: str) -> list[dict[str, Any]]:
        """Every session (``GET /api/session``), following ``cursor.next`` page by page.

        Query parameters (OpenAPI ``v2.session.list``, checked against 1.18.33): ``limit`` (integer >= 1,
        no upper bound seen, default 50), ``order`` (``asc``|``desc``, default newest first),
        ``cursor`` (opaque keyset token from ``cursor.next``/``cursor.previous``; it carries the order),
        and the filters ``search``, ``directory``, ``project``, ``subpath``, ``workspace``. ``cursor.next``
        is present on the last page too; the page after it is empty with ``cursor`` ``{null, null}``.
        A short page therefore ends the walk, and so do an empty page or a missing ``next``.
        """
        sessions: list[dict[str, Any]] = []
        params: dict[str, str] = {"limit": str(page_size), **filters}
        if order is not None:
            params["order"] = order
        seen_cursors: set[str] = set()
        while True:
            page = await self.request("GET", "/api/session", params=params)
            data: list[dict[str, Any]] = page["data"]
            sessions.extend(data)
            following = (page.get("cursor") or {}).get("next")
            if not data or len(data) < page_size or not following:
                return sessions
            if following in seen_cursors:
                raise OpencodeError(f"GET /api/session: cursor {following} repeated")
            seen_cursors.add(following)
            params["cursor"] = following

    async def delete_session(self, session_id: str) -> None:
        """Legacy ``DELETE /session/{id}`` (there is no v2 delete)."""
        await self.request("DELETE", f"/session/{session_id}")

    async def interrupt(self, session_id: str) -> None:
        await self.request("POST", f"/api/session/{session_id}/interrupt", expect=(204,))

    # --- the legacy API and the sync log (docs/upstream.md §13, §14, §16) --------------------------------

    async def sync_history(self, session_id: str, after: int = 0) -> list[dict[str, Any]]:
        """``POST /sync/history {sid: after}``: the session's whole persisted log after ``after``."""
        body: list[dict[str, Any]] = await self.request("POST", "/sync/history", json_body={session_id: after})
        return body

    async def sync_log(self, session_id: str) -> list[dict[str, Any]]:
        """The session's whole persisted log **from seq 0** (`session.created` included): ``POST /sync/history
        {}`` (every aggregate from the start; a cutoff below 0 is refused), this session's items only."""
        body: list[dict[str, Any]] = await self.request("POST", "/sync/history", json_body={})
        return [i for i in body if i.get("aggregate_id") == session_id]

    async def prompt_async(self, session_id: str, text: str) -> None:
        """Legacy ``POST /session/{id}/prompt_async`` (204): how the bundled web app prompts."""
        await self.request("POST", f"/session/{session_id}/prompt_async",
                           json_body={"parts": [{"type": "text", "text": text}]}, expect=(204,))

    async def legacy_messages(self, session_id: str) -> list[dict[str, Any]]:
        """Legacy ``GET /session/{id}/message``: ``[{info, parts}]``, oldest first."""
        body: list[dict[str, Any]] = await self.request("GET", f"/session/{session_id}/message")
        return body

    async def wait_legacy_idle(self, session_id: str, turns: int, timeout: float = 60.0) -> None:
        """Wait until ``turns`` user messages each have a completed final assistant message (``finish``
        other than ``tool-calls``) and the session is not in ``/api/session/active``."""

        async def done() -> bool:
            msgs = await self.legacy_messages(session_id)
            users = [m for m in msgs if m["info"].get("role") == "user"]
            finals = [m for m in msgs if m["info"].get("role") == "assistant"
                      and m["info"].get("time", {}).get("completed") and m["info"].get("finish") != "tool-calls"]
            return len(users) >= turns and len(finals) >= turns and session_id not in await self.active()

        await wait_until(done, timeout, 0.2, message=f"legacy turns of {session_id} done")

    def cli_command(self, session_id: str, text: str) -> list[str]:
        """OpenCode's own CLI driving one turn of a session of this serve (docs/upstream.md §13)."""
        return [str(self.binary), "run", "--attach", self.base_url, "--session", session_id, text]

    async def run_cli(self, session_id: str, text: str, timeout: float = 90.0) -> str:
        """Run ``opencode run --attach <url> --session <id> <text>`` with the serve's HOME and config (so
        it uses the mock model) until it exits; returns its output. A non-zero exit raises."""
        process = await asyncio.create_subprocess_exec(
            *self.cli_command(session_id, text), cwd=self.project_dir, env=self.environment(),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        if process.returncode != 0:
            raise OpencodeError(f"opencode run failed ({process.returncode}): {output.decode()[-2000:]}")
        return output.decode()

    async def messages(self, session_id: str) -> list[dict[str, Any]]:
        """v2 ``GET /api/session/{id}/message`` (newest first)."""
        response = await self.request("GET", f"/api/session/{session_id}/message")
        data: list[dict[str, Any]] = response["data"]
        return data


def _newest_prompt_handled(events: Sequence[Mapping[str, Any]], require_step_end: bool) -> bool:
    admitted = [e for e in events if e.get("type") == PROMPT_ADMITTED]
    if not admitted:
        return True  # nothing was ever prompted
    message_id = admitted[-1]["data"]["messageID"]
    prompted_seq = next((int(e["durable"]["seq"]) for e in events
                         if e.get("type") == PROMPTED and e["data"].get("messageID") == message_id), None)
    if prompted_seq is None:
        return False
    if not require_step_end:
        return True
    return any(e.get("type") in STEP_END_TYPES and int(e["durable"]["seq"]) > prompted_seq for e in events)


def _load_prctl() -> Callable[[int, int], int] | None:
    if sys.platform != "linux":
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes, prctl.restype = [ctypes.c_int, ctypes.c_ulong], ctypes.c_int
    return cast("Callable[[int, int], int]", prctl)


_PR_SET_PDEATHSIG = 1
_PRCTL = _load_prctl()  # resolved here, so the child only makes the call


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, SIGKILL the serve if the test process dies (even by SIGKILL)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL))


class _ProcessRef:
    """A pid plus its start time, so a recycled pid is never signalled."""

    def __init__(self, pid: int, start_time: str) -> None:
        self.pid, self.start_time = pid, start_time

    def kill(self) -> None:
        if _proc_stat(self.pid)[1] == self.start_time:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)


def _proc_stat(pid: int) -> tuple[int | None, str | None]:
    """(parent pid, start time) from /proc/<pid>/stat; (None, None) if gone or not on Linux."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None, None
    fields = raw[raw.rindex(")") + 2:].split()  # the command name may contain spaces and parentheses
    return int(fields[1]), fields[19]


def _descendants(root: int) -> list[_ProcessRef]:
    """Every live descendant of ``root`` (empty where /proc is unavailable)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, str] = {}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for pid in pids:
        parent, start = _proc_stat(pid)
        if parent is not None and start is not None:
            children.setdefault(parent, []).append(pid)
            starts[pid] = start
    found: list[_ProcessRef] = []
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        found.append(_ProcessRef(pid, starts[pid]))
        pending.extend(children.get(pid, []))
    return found


def _write_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def _run(*command: str, cwd: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        *command, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    if process.returncode != 0:
        raise OpencodeError(f"{' '.join(command)} failed in {cwd} ({process.returncode}): {output.decode()}")
