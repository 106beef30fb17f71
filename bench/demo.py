"""`make demo`: see the bridge work in a minute, on a fresh machine, with nothing configured.

Starts, all on 127.0.0.1 and under one throw-away work directory: an embedded PostgreSQL, the
project-local `opencode serve` 1.18.33 wired to the project's scripted mock model
(tests/support/mock_llm.py, so no API key and no network), and the bridge (`opencode-bridge run`). Then it
prints the viewer URL with a token and drives a short conversation through opencode's v2 API: a text turn
streamed slowly (watch it arrive), a reasoning turn, a tool turn (bash and read), and a prompt whose tool
asks for permission (left pending, so the viewer highlights it). Ctrl-C (or SIGTERM) stops everything it
started, in order: the bridge, opencode (and the tools it ran), the mock model, PostgreSQL.

    make demo                              # interactive: runs until Ctrl-C
    .venv/bin/python -m bench.demo --once  # runs the conversation, checks the mirror, stops (exit 1 if not)

Progress goes to stdout, readable; with `--json` as one JSON object a line instead (`demo_ready` carries the
viewer URL, the token, the database URL and the pids; `demo_script_done` the session and what the bridge
shows of it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bridge.auth import mint_token
from bridge.store.embedded import EmbeddedPostgres, start_embedded
from tests.support.bridge_proc import BridgeProcess, free_port
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]
UPSTREAM = "demo"
DEFAULT_OPENCODE = REPO / ".opencode" / "node_modules" / ".bin" / "opencode"

# (what it shows, the prompt: the mock model replies to the MOCK: directive in it)
STREAMING_TURN = ("text, streamed", "MOCK:slow:24:0.25 Count slowly, so the viewer shows the text streaming")
TURNS = (
    ("reasoning and text", "MOCK:reason Say hello to the demo"),
    ("tool calls", "MOCK:tool Run echo, then read hello.txt"),
)
PERMISSION_TURN = ("permission request", "MOCK:perm Touch a file (the serve asks before `touch`)")


@dataclass
class Conversation:
    session_id: str
    turns: list[str] = field(default_factory=list)
    permission_id: str = ""


async def converse(serve: OpencodeServe, *, streaming: bool = True, say: Any = None,
                   session_id: str | None = None) -> Conversation:
    """The scripted conversation, driven through the serve's v2 API (in a new session unless one is
    given); returns once the permission request is pending upstream (the turn waits for it)."""
    sid = session_id or await serve.create_session()
    convo = Conversation(sid)
    for what, prompt in ((STREAMING_TURN,) if streaming else ()) + TURNS:
        if say:
            say(f"turn: {what}", event="demo_turn", session=sid, turn=what)
        await serve.prompt(sid, prompt)
        await serve.wait_idle(sid, 90)
        convo.turns.append(what)
    if say:
        say(f"turn: {PERMISSION_TURN[0]}", event="demo_turn", session=sid, turn=PERMISSION_TURN[0])
    await serve.prompt(sid, PERMISSION_TURN[1])

    async def pending() -> str:
        asked = await serve.request("GET", f"/api/session/{sid}/permission")
        return str(asked["data"][0]["id"]) if asked.get("data") else ""

    convo.permission_id = await wait_until(pending, 60, 0.1, message="permission request pending")
    convo.turns.append(PERMISSION_TURN[0])
    return convo


async def mirrored(bridge_url: str, token: str, sid: str) -> dict[str, Any]:
    """What the bridge shows of the session through its audit API (the check of `--once`)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as http, \
            http.get(f"{bridge_url}/v1/sessions/{sid}/transcript") as r:
        r.raise_for_status()
        entries = (await r.json())["data"]["entries"]
    tools = [p for e in entries if e["type"] == "assistant" for p in e["parts"] if p["type"] == "tool"]
    return {"prompts": sum(e["type"] == "user" for e in entries), "tool_calls": len(tools),
            "tools_succeeded": sum(t["status"] == "success" for t in tools)}


class Demo:
    """Owns every process it starts; `close()` stops them in reverse order of start."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.secret = secrets.token_urlsafe(32)
        self.pg: EmbeddedPostgres | None = None
        self.mock = MockLLM(log_path=workdir / "mock-llm.jsonl")
        self.serve: OpencodeServe | None = None
        self.bridge: BridgeProcess | None = None

    def say(self, human: str, **fields: Any) -> None:
        print(json.dumps(fields) if self.args.json else human, flush=True)

    async def start(self) -> str:
        self.say(f"starting in {self.workdir}: PostgreSQL (embedded)…", event="demo_starting",
                 workdir=str(self.workdir))
        self.pg = await asyncio.to_thread(start_embedded, self.workdir / "pg")
        await self.mock.start()
        self.serve = OpencodeServe(self.args.opencode, self.workdir / "opencode", self.mock.base_url)
        self.say(f"starting opencode serve ({self.args.opencode}) on the scripted mock model…",
                 event="demo_starting_opencode")
        await self.serve.start()
        self.say("starting the bridge…", event="demo_starting_bridge")
        self.bridge = BridgeProcess(self.workdir, self.serve.base_url, self.pg.url, extra_env={
            "BRIDGE_UPSTREAM_NAME": UPSTREAM, "BRIDGE_AUTH_SECRET": self.secret,
            # Sessions may be created (the viewer, a control token) only in the demo's own work directory.
            "BRIDGE_ALLOWED_DIRECTORIES": str(self.workdir.resolve()),
            # A developer's own dev server (e.g. http://localhost:5173) may call the bridge: CORS, WebSocket.
            "BRIDGE_ALLOWED_ORIGINS": ",".join(self.args.origin)}, start_new_session=True)
        if self.args.port:
            self.bridge.port = self.args.port
        self.bridge.start()
        await self.bridge.wait_ready(90)
        # A control token that may answer "Allow once": the viewer's composer, Stop, permission and question
        # buttons all work with it (docs/security.md, "Tokens").
        token = mint_token(self.secret, UPSTREAM, None, self.args.token_ttl, "demo", scope="control",
                           approve="once")
        url = f"{self.bridge.url}/?token={token}"
        assert self.bridge.proc is not None
        mint = (f"BRIDGE_AUTH_SECRET={self.secret} BRIDGE_UPSTREAM_NAME={UPSTREAM} "
                ".venv/bin/opencode-bridge token --scope prompt --subject you")
        origins = ", ".join(self.args.origin) or "none (add yours: DEMO_ARGS='--origin http://localhost:5173')"
        human = (f"\n  viewer     {url}\n  bridge     {self.bridge.url} (token: control, approve once)\n"
                 f"  origins    {origins}\n  opencode   {self.serve.base_url}\n  database   {self.pg.url}\n"
                 f"  logs       {self.bridge.log_path}, {self.serve.log_path}\n"
                 f"  more tokens: {mint}\n"
                 "\nOpen the viewer now: the conversation starts. Ctrl-C stops everything.\n")
        self.say(human, event="demo_ready", viewer_url=url, token=token, bridge_url=self.bridge.url,
                 secret=self.secret, upstream=UPSTREAM, mint_command=mint, allowed_origins=self.args.origin,
                 database_url=self.pg.url, opencode_url=self.serve.base_url, pids={
                     "bridge": self.bridge.proc.pid, "opencode": self.serve.pid,
                     "postgres": _postmaster_pid(self.workdir / "pg" / "pgdata")},
                 logs={"bridge": str(self.bridge.log_path), "opencode": str(self.serve.log_path)})
        return token

    async def script(self) -> bool:
        """Start everything, run the conversation, wait until the bridge shows all of it."""
        token = await self.start()
        assert self.serve is not None and self.bridge is not None
        sid = await self.serve.create_session()
        self.say(f"session {sid}: {self.bridge.url}/?token={token}#/sessions/{sid}", event="demo_session",
                 session=sid)
        convo = await converse(self.serve, streaming=not self.args.once, say=self.say, session_id=sid)
        bridge_url, want = self.bridge.url, len(convo.turns)

        async def complete() -> dict[str, Any] | None:
            shown = await mirrored(bridge_url, token, convo.session_id)
            # Every prompt, the two tools that ran, and the one waiting for permission: its call may be
            # committed a moment after the two that succeeded.
            whole = shown["prompts"] == want and shown["tools_succeeded"] >= 2 and shown["tool_calls"] >= 3
            return shown if whole else None

        shown = await wait_until(complete, 30, 0.2, message="conversation mirrored by the bridge")
        self.say(f"conversation done: the bridge shows {shown['prompts']} prompts and {shown['tool_calls']} tool "
                 f"calls ({shown['tools_succeeded']} succeeded, one waits for permission); "
                 + ("stopping" if self.args.once else "Ctrl-C stops everything"),
                 event="demo_script_done", session=convo.session_id, turns=convo.turns,
                 permission=convo.permission_id, mirrored=shown)
        return True

    async def close(self) -> None:
        if self.bridge is not None:
            await asyncio.to_thread(self.bridge.stop)  # SIGTERM: hands its leases back, closes clients
        if self.serve is not None:
            await self.serve.close()  # its process group too (tools it ran)
        await self.mock.stop()
        if self.pg is not None:
            await asyncio.to_thread(self.pg.stop)


def _postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@contextlib.asynccontextmanager
async def _stopped_by_signals() -> AsyncIterator[asyncio.Event]:
    """SIGINT (Ctrl-C) and SIGTERM set the event; a second one exits at once."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            os._exit(130)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        yield stop
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _until(stop: asyncio.Event, work: Any) -> Any:
    """Run `work` unless a stop signal comes first (then it is cancelled and None returned)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None
    return task.result()


async def run(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bridge-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    demo = Demo(args, workdir)
    rc = 0
    async with _stopped_by_signals() as stop:
        try:
            done = await _until(stop, demo.script())
            if done and not args.once:
                await stop.wait()
        except BaseException:
            rc = 1
            raise
        finally:
            demo.say("stopping: bridge, opencode, mock model, PostgreSQL", event="demo_stopping")
            await demo.close()
            demo.say("stopped" + (f"; logs kept in {workdir}" if rc else ""), event="demo_stopped", rc=rc)
    if not args.workdir and not args.keep:  # a failed run keeps its logs (the exception skips this)
        shutil.rmtree(workdir, ignore_errors=True)
    return rc


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--once", action="store_true", help="run the conversation, check the mirror, stop")
    ap.add_argument("--port", type=int, default=8765, help="the bridge's HTTP port (0: any free port)")
    ap.add_argument("--workdir", help="keep everything here (default: a temporary directory, removed at exit)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary work directory (logs)")
    ap.add_argument("--json", action="store_true", help="progress as one JSON object a line (for tests)")
    ap.add_argument("--token-ttl", type=float, default=12 * 3600, help="viewer token lifetime, seconds")
    ap.add_argument("--origin", action="append",
                    default=[o.strip() for o in os.environ.get("DEMO_ORIGINS", "").split(",") if o.strip()],
                    help="an origin that may call the bridge from a browser, e.g. your dev server "
                         "http://localhost:5173 (repeatable; or DEMO_ORIGINS=a,b)")
    ap.add_argument("--opencode", default=os.environ.get("OPENCODE_BIN", str(DEFAULT_OPENCODE)))
    args = ap.parse_args(argv)
    if args.port == 0:
        args.port = free_port()
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(run(parse_args())))
