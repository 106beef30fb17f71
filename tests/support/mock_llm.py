"""Scripted OpenAI-compatible chat-completions provider for driving a real ``opencode serve``.

Runs in-process (``async with MockLLM() as mock: ...`` on the test's event loop, 127.0.0.1, port 0)
or as a script: ``python -m tests.support.mock_llm --port 8790`` (one JSON line per request on stdout).

Endpoints: ``POST /v1/chat/completions`` (streaming SSE ``chat.completion.chunk``s, or one JSON body
when ``stream`` is false), ``GET /v1/models``, and two control routes for the script mode:
``POST /_mock/release/{gate}`` and ``GET /_mock/requests``.

The reply is chosen by a directive ``MOCK:<name>[:arg...]`` in the newest *user* message. The *step* is
the number of assistant messages after that user message (each tool round trip adds one).

=====================  =====================================================================
directive              reply
=====================  =====================================================================
``text``               "Hello from the mock server." in 5 chunks
``reason``             reasoning "Let me think briefly." (3 chunks), then the ``text`` answer
``slow[:N[:DELAY]]``   N chunks "tick i " spaced DELAY s (default 40 x 0.25 s = 10 s)
``gate:NAME[:K]``      K text chunks (default 1), then waits for ``MockLLM.release(NAME)``, then
                       finishes; K=0 parks right after the response headers, before any chunk
``tool``               step 0: bash ``echo hi``; step 1: read hello.txt; step 2+: final text
``slowtool[:S]``       step 0: bash ``sleep S; echo slept`` (default 4); step 1+: final text
``perm``               step 0: bash ``touch perm-test.txt`` (configured as "ask"); then final text
``badtool``            step 0: read with a wrong argument name (the tool fails); then final text
``question[:multi]``    step 0: the built-in ``question`` tool (Color: Red/Blue; ``multi``: several
                       choices allowed); step 1+: final text (the request carries the tool result)
``cut``                2 text chunks, then the body ends without finish_reason and ``[DONE]``
``errchunk``           1 text chunk, then an in-stream ``{"error": ...}`` chunk
``eNNN``               HTTP NNN on every attempt (``e500``, ``e401``; ``e429`` adds retry-after: 1)
(none)                 "ok"
=====================  =====================================================================

"Gate reached" means the mock has *written* the chunks before the gate; opencode commits
``step.started``/``text.started`` a few milliseconds later. A test that needs the step to be open (e.g.
before an interrupt or a kill) must also wait for those events in the history.

Title-generation requests (a system prompt mentioning "title" and no tools) get "Mock title".
Every request is recorded (:attr:`MockLLM.requests`) with its directive, step, attempt and time, and
every message it carried as ``(role, text)`` (``RecordedRequest.messages``, ``.user_texts``): what the
model saw, so a test can tell whether an earlier turn was part of the conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import itertools
import json
import re
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from tests.support.waiting import wait_until

__all__ = [
    "FINAL_TEXT",
    "HELLO_TEXT",
    "MockLLM",
    "RecordedRequest",
    "parse_directive",
    "plan_reply",
]

MODEL_ID = "mock-1"
HELLO_CHUNKS = ("Hello", " from", " the mock", " server", ".")
HELLO_TEXT = "".join(HELLO_CHUNKS)  # "Hello from the mock server."
FINAL_CHUNKS = ("Done", ": the tool ", "returned ", "its output.")
FINAL_TEXT = "".join(FINAL_CHUNKS)
REASONING_CHUNKS = ("Let me", " think", " briefly.")
TITLE_TEXT = "Mock title"
USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}

_DIRECTIVE_RE = re.compile(r"MOCK:([a-z][a-z0-9]*)((?::[^\s:]+)*)")

Outcome = Literal["pending", "completed", "cut", "error-status", "disconnected", "aborted"]


@dataclass(frozen=True)
class Directive:
    name: str
    args: tuple[str, ...] = ()


def parse_directive(text: str) -> Directive:
    """``"MOCK:slow:40:0.25 go"`` -> ``Directive("slow", ("40", "0.25"))``; no directive -> ``"none"``."""
    match = _DIRECTIVE_RE.search(text)
    if match is None:
        return Directive("none")
    args = tuple(a for a in match.group(2).split(":") if a)
    return Directive(match.group(1), args)


# --- replies -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextReply:
    chunks: tuple[str, ...]
    delay: float
    reasoning: tuple[str, ...] = ()
    gate: str | None = None  # wait until the gate is released ...
    gate_after: int = 1  # ... after this many text chunks (0: before any chunk, even the role chunk)
    cut: bool = False  # end the body after the chunks: no finish_reason, no [DONE]
    error_chunk: bool = False  # after the chunks, an in-stream {"error": ...} payload (implies cut)


@dataclass(frozen=True)
class ToolReply:
    tool: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class ErrorReply:
    status: int
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)


Reply = TextReply | ToolReply | ErrorReply


def _arg(args: Sequence[str], index: int, default: float) -> float:
    try:
        return float(args[index])
    except (IndexError, ValueError):
        return default


def question_prompt(multiple: bool = False) -> dict[str, Any]:
    """The question `MOCK:question` asks (the shape of the `question` tool's input, docs/upstream.md §18)."""
    q: dict[str, Any] = {"question": "Which color do you prefer?", "header": "Color",
                         "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]}
    if multiple:
        q["multiple"] = True
    return q


def plan_reply(directive: Directive, step: int, chunk_delay: float = 0.05) -> Reply:
    """Pure mapping directive x step -> reply (no I/O; unit-testable)."""
    name, args = directive.name, directive.args
    final = TextReply(FINAL_CHUNKS, chunk_delay)
    if name == "text":
        return TextReply(HELLO_CHUNKS, chunk_delay)
    if name == "reason":
        return TextReply(HELLO_CHUNKS, chunk_delay, reasoning=REASONING_CHUNKS)
    if name == "slow":
        count, delay = int(_arg(args, 0, 40)), _arg(args, 1, 0.25)
        return TextReply(tuple(f"tick {i} " for i in range(count)), delay)
    if name == "gate":
        gate = args[0] if args else "default"
        gate_after = max(0, int(_arg(args, 1, 1)))
        chunks = (*(f"Gate {gate} chunk {i}. " for i in range(gate_after)), "Released.")
        return TextReply(chunks, chunk_delay, gate=gate, gate_after=gate_after)
    if name == "tool":
        tool_steps: list[Reply] = [
            ToolReply("bash", {"command": "echo hi", "description": "Print hi"}),
            ToolReply("read", {"path": "hello.txt"}),
        ]
        return tool_steps[step] if step < len(tool_steps) else final
    if name == "slowtool":
        seconds = _arg(args, 0, 4)
        if step == 0:
            return ToolReply("bash", {"command": f"sleep {seconds:g}; echo slept",
                                      "description": "Sleep then print"})
        return final
    if name == "perm":
        if step == 0:
            return ToolReply("bash", {"command": "touch perm-test.txt", "description": "Create a file"})
        return final
    if name == "badtool":
        return ToolReply("read", {"filePath": "hello.txt"}) if step == 0 else final
    if name == "question":
        return ToolReply("question", {"questions": [question_prompt("multi" in args)]}) if step == 0 else final
    # Built-in tools of a plain serve, shaped as in the captures x14 (docs/upstream.md §20).
    if name == "task":  # a subagent: the child session's own request gets `MOCK:none` ("ok")
        task = {"description": "Say hi", "prompt": "MOCK:none", "subagent_type": "general"}
        return ToolReply("task", task) if step == 0 else final
    if name == "todo":
        todos = [{"content": "Write tests", "status": "in_progress", "priority": "high"},
                 {"content": "Ship it", "status": "pending", "priority": "low"}]
        return ToolReply("todowrite", {"todos": todos}) if step == 0 else final
    if name == "write":
        return ToolReply("write", {"filePath": "written.txt", "content": "hello world\n"}) if step == 0 else final
    if name == "cut":
        return TextReply(("Partial", " answer"), chunk_delay, cut=True)
    if name == "errchunk":
        return TextReply(("Partial",), chunk_delay, error_chunk=True)
    if re.fullmatch(r"e\d{3}", name):
        status = int(name[1:])
        headers = {"retry-after": "1"} if status == 429 else {}
        return ErrorReply(status, f"Mock HTTP {status} error", headers)
    if name == "none":
        return TextReply(("ok",), 0)
    return TextReply((f"Unknown mock directive: {name}",), 0)


def _describe_reply(reply: Reply) -> str:
    if isinstance(reply, ToolReply):
        return f"tool:{reply.tool}"
    if isinstance(reply, ErrorReply):
        return f"error:{reply.status}"
    if reply.gate is not None:
        return f"gate:{reply.gate}"
    return "cut" if reply.cut or reply.error_chunk else "text"


# --- request bookkeeping -------------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One chat-completions call as the mock saw it. ``outcome`` is updated as the reply proceeds."""

    directive: str  # directive name, "title" for title generation, "none" without a directive
    args: tuple[str, ...]
    step: int
    attempt: int  # 1 for the first call with this (user message, step); retries count up
    time: float  # epoch seconds when the request arrived
    reply: str  # "text", "tool:bash", "error:500", "gate:NAME", "cut"
    stream: bool
    model: str | None
    roles: tuple[str, ...]
    tools: tuple[str, ...]
    user_text: str
    # every message of the request as (role, text), system prompts included: what the model saw
    messages: tuple[tuple[str, str], ...] = ()
    images: tuple[str, ...] = ()  # image parts of the user messages, see _images_of
    outcome: Outcome = "pending"
    finished: float | None = None
    tool_results: tuple[str, ...] = ()  # the `tool` messages after the newest user message (tool outputs)

    @property
    def user_texts(self) -> list[str]:
        """The text of every user message the request carried, oldest first (earlier turns included)."""
        return [text for role, text in self.messages if role == "user"]

    def carries(self, marker: str) -> bool:
        """Whether any user message of the request contains ``marker``."""
        return any(marker in text for text in self.user_texts)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _images_of(content: object) -> list[str]:
    """The image parts of a message (``image_url.url``: a ``data:`` URL or a link), each as its media type
    and the SHA-256 of the decoded bytes (``image/png:3f2a…``), or the link itself."""
    out: list[str] = []
    for p in content if isinstance(content, list) else []:
        url = (p.get("image_url") or {}).get("url") if isinstance(p, dict) else None
        if not isinstance(url, str):
            continue
        head, _, data = url.partition(",")
        if url.startswith("data:") and head.endswith(";base64"):
            digest = hashlib.sha256(base64.b64decode(data + "==")).hexdigest()
            out.append(f"{head[5:].removesuffix(';base64')}:{digest}")
        else:
            out.append(url[:200])
    return out


@dataclass(frozen=True)
class _Analysis:
    directive: Directive
    step: int
    user_text: str
    roles: tuple[str, ...]
    tools: tuple[str, ...]
    tool_results: tuple[str, ...] = ()
    messages: tuple[tuple[str, str], ...] = ()
    images: tuple[str, ...] = ()


def _analyse(body: Mapping[str, Any]) -> _Analysis:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    roles = tuple(str(m.get("role")) for m in messages)
    tools = tuple(str((t.get("function") or {}).get("name")) for t in body.get("tools") or []
                  if isinstance(t, dict))
    system = " ".join(_text_of(m.get("content")) for m in messages if m.get("role") == "system")
    user_indexes = [i for i, role in enumerate(roles) if role == "user"]
    last_user = user_indexes[-1] if user_indexes else -1
    user_text = _text_of(messages[last_user].get("content")) if last_user >= 0 else ""
    step = sum(1 for role in roles[last_user + 1:] if role == "assistant")
    results = tuple(_text_of(m.get("content")) for m in messages[last_user + 1:] if m.get("role") == "tool")
    seen = tuple((str(m.get("role")), _text_of(m.get("content"))) for m in messages)
    images = tuple(i for m in messages if m.get("role") == "user" for i in _images_of(m.get("content")))
    if "title" in system.lower() and not tools:
        return _Analysis(Directive("title"), 0, user_text, roles, tools, (), seen, images)
    return _Analysis(parse_directive(user_text), step, user_text, roles, tools, results, seen, images)


# --- the server ----------------------------------------------------------------------------------------


class MockLLM:
    """The in-process mock. ``start()`` binds 127.0.0.1:``port`` (0 = any free port)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        chunk_delay: float = 0.05,
        log_path: Path | None = None,
        on_request: Callable[[RecordedRequest], None] | None = None,
    ) -> None:
        self.host = host
        self.chunk_delay = chunk_delay
        self.log_path = log_path
        self.on_request = on_request
        self.requests: list[RecordedRequest] = []
        self._requested_port = port
        self._port: int | None = None
        self._runner: web.AppRunner | None = None
        self._attempts: dict[tuple[str, int], int] = {}
        self._gates_open: dict[str, asyncio.Event] = {}
        self._gates_reached: dict[str, asyncio.Event] = {}
        self._ids = itertools.count(1)
        self._stopping = False

    # lifecycle

    async def start(self) -> MockLLM:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/_mock/release/{gate}", self._release_route)
        app.router.add_get("/_mock/requests", self._requests_route)
        # handler_cancellation: a client that hangs up (opencode interrupting a turn) cancels the
        # handler, so a stream parked at a gate notices the disconnect at once.
        runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True,
                               shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._requested_port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        address = runner.addresses[0]
        self._port = int(address[1])
        self._stopping = False
        return self

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._stopping = True
        await runner.cleanup()

    async def __aenter__(self) -> MockLLM:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("MockLLM is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``http://127.0.0.1:N/v1``) for the provider config."""
        return f"http://{self.host}:{self.port}/v1"

    # assertions / control

    def requests_for(self, directive: str, step: int | None = None) -> list[RecordedRequest]:
        return [r for r in self.requests if r.directive == directive and (step is None or r.step == step)]

    async def wait_for_request(self, directive: str, step: int | None = None, *, count: int = 1,
                               timeout: float = 15.0) -> RecordedRequest:
        """Wait until ``count`` requests for ``directive`` (and ``step``) arrived; return the last one."""
        def seen() -> list[RecordedRequest]:
            found = self.requests_for(directive, step)
            return found if len(found) >= count else []

        found = await wait_until(seen, timeout, 0.02,
                                 message=f"{count} provider request(s) for MOCK:{directive} step {step}")
        return found[count - 1]

    def release(self, gate: str) -> None:
        """Let every stream parked at ``gate`` (now or later) finish."""
        self._gate(self._gates_open, gate).set()

    def gate_reached(self, gate: str) -> bool:
        return self._gate(self._gates_reached, gate).is_set()

    async def wait_gate_reached(self, gate: str, timeout: float = 15.0) -> None:
        """Wait until a stream has sent its first chunk and is parked at ``gate``."""
        try:
            await asyncio.wait_for(self._gate(self._gates_reached, gate).wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"no provider stream reached gate {gate!r} within {timeout:g} s") from None

    @staticmethod
    def _gate(table: dict[str, asyncio.Event], name: str) -> asyncio.Event:
        event = table.get(name)
        if event is None:
            event = table[name] = asyncio.Event()
        return event

    # handlers

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list",
                                  "data": [{"id": MODEL_ID, "object": "model", "owned_by": "mock"}]})

    async def _release_route(self, request: web.Request) -> web.Response:
        self.release(request.match_info["gate"])
        return web.json_response({"released": request.match_info["gate"]})

    async def _requests_route(self, request: web.Request) -> web.Response:
        return web.json_response([r.as_json() for r in self.requests])

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": {"message": "invalid JSON"}}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": {"message": "expected an object"}}, status=400)
        analysis = _analyse(body)
        key = (analysis.user_text, analysis.step)
        attempt = self._attempts[key] = self._attempts.get(key, 0) + 1
        if analysis.directive.name == "title":
            reply: Reply = TextReply((TITLE_TEXT,), 0)
        else:
            reply = plan_reply(analysis.directive, analysis.step, self.chunk_delay)
        record = RecordedRequest(
            directive=analysis.directive.name, args=analysis.directive.args, step=analysis.step,
            attempt=attempt, time=time.time(), reply=_describe_reply(reply), stream=bool(body.get("stream")),
            model=body.get("model"), roles=analysis.roles, tools=analysis.tools, user_text=analysis.user_text,
            tool_results=analysis.tool_results,
            messages=analysis.messages, images=analysis.images,
        )
        self.requests.append(record)
        self._log(record)
        try:
            if isinstance(reply, ErrorReply):
                record.outcome = "error-status"
                return web.json_response(
                    {"error": {"message": reply.message, "type": "mock_error", "code": reply.status}},
                    status=reply.status, headers=dict(reply.headers))
            if not record.stream:
                response = await self._whole(reply)
                record.outcome = "completed"
                return response
            return await self._stream(request, reply, record)
        except asyncio.CancelledError:
            record.outcome = "aborted" if self._stopping else "disconnected"
            raise
        except ConnectionError:
            record.outcome = "disconnected"
            raise
        finally:
            record.finished = time.time()
            if record.outcome != "pending":
                self._log(record)

    async def _whole(self, reply: TextReply | ToolReply) -> web.Response:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if isinstance(reply, ToolReply):
            message["tool_calls"] = [{"id": self._call_id(reply.tool), "type": "function",
                                      "function": {"name": reply.tool,
                                                   "arguments": json.dumps(reply.arguments)}}]
            finish = "tool_calls"
        else:
            if reply.gate is not None:
                await self._park(reply.gate)
            message["content"] = "".join(reply.chunks)
            finish = "stop"
        return web.json_response({
            "id": f"chatcmpl-mock-{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
            "model": MODEL_ID, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": USAGE,
        })

    async def _stream(self, request: web.Request, reply: TextReply | ToolReply,
                      record: RecordedRequest) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        completion_id = f"chatcmpl-mock-{next(self._ids)}"

        async def chunk(delta: Mapping[str, Any], finish: str | None = None,
                        usage: Mapping[str, int] | None = None) -> None:
            payload: dict[str, Any] = {
                "id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": MODEL_ID, "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
            }
            if usage is not None:
                payload["usage"] = dict(usage)
            await send(payload)

        async def send(payload: Mapping[str, Any]) -> None:
            await response.write(f"data: {json.dumps(payload)}\n\n".encode())

        if isinstance(reply, TextReply) and reply.gate is not None and reply.gate_after == 0:
            await self._park(reply.gate)
        await chunk({"role": "assistant", "content": ""})
        if isinstance(reply, ToolReply):
            raw = json.dumps(reply.arguments)
            await chunk({"tool_calls": [{"index": 0, "id": self._call_id(reply.tool), "type": "function",
                                         "function": {"name": reply.tool, "arguments": ""}}]})
            for start in range(0, len(raw), 12):  # arguments arrive in pieces, like a real provider
                await chunk({"tool_calls": [{"index": 0, "function": {"arguments": raw[start:start + 12]}}]})
            await chunk({}, "tool_calls", USAGE)
        else:
            for piece in reply.reasoning:
                await asyncio.sleep(reply.delay)
                await chunk({"reasoning_content": piece})
            for index, piece in enumerate(reply.chunks):
                if reply.gate is not None and reply.gate_after > 0 and index == reply.gate_after:
                    await self._park(reply.gate)
                await asyncio.sleep(reply.delay)
                await chunk({"content": piece})
            if reply.error_chunk:
                await send({"error": {"message": "Overloaded (mock)", "type": "server_error", "code": 529}})
            if reply.cut or reply.error_chunk:
                record.outcome = "cut"
                await response.write_eof()  # the body just ends: no finish_reason, no [DONE]
                return response
            await chunk({}, "stop", USAGE)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        record.outcome = "completed"
        return response

    async def _park(self, gate: str) -> None:
        self._gate(self._gates_reached, gate).set()
        await self._gate(self._gates_open, gate).wait()

    def _call_id(self, tool: str) -> str:
        return f"call_{tool}_{next(self._ids)}"

    def _log(self, record: RecordedRequest) -> None:
        if self.on_request is not None:
            self.on_request(record)
        if self.log_path is not None:
            with self.log_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record.as_json()) + "\n")


# --- script mode ---------------------------------------------------------------------------------------


async def _serve_forever(port: int, log_path: Path | None) -> None:
    def echo(record: RecordedRequest) -> None:
        print(json.dumps(record.as_json()), flush=True)

    mock = MockLLM(port=port, log_path=log_path, on_request=echo)
    await mock.start()
    print(f"mock LLM listening on {mock.base_url}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await mock.stop()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.mock_llm",
                                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8790, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--log", type=Path, help="also append one JSON line per request to this file")
    options = parser.parse_args(argv)
    asyncio.run(_serve_forever(options.port, options.log))


if __name__ == "__main__":
    main()
