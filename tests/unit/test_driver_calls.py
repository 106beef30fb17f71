"""What each driver sends for each command and how it reads what comes back, request by request on an
in-memory transport: the 1.x driver sends exactly today's calls (bridge.upstream.commands), the 2.x driver
the calls of 2.x's source (bridge.upstream.gen2.driver); bad frames are kept or counted, never fatal; a 2.x
log read that fails upstream ends the read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.errors import UpstreamUnavailable
from bridge.upstream.client import UpstreamClient
from bridge.upstream.driver import SWEEP, Change
from bridge.upstream.gen1_driver import Gen1Driver
from bridge.upstream.gen2.driver import Gen2Driver
from bridge.upstream.http_base import UpstreamHttp
from bridge.upstream.transport import MockTransport, Request, Response, bytes_body
from tests.support.memory_upstream import json_response
from tests.support.metric_values import sample

SID = "ses_dcf69c6a5ffeHQxvSA7FrlelcL"
DIR = "/srv/p"
LOC = "location%5Bdirectory%5D=%2Fsrv%2Fp"


class Recorder:
    def __init__(self, answers: dict[str, Response] | None = None) -> None:
        self.sent: list[tuple[str, str, Any]] = []
        self.answers = answers or {}

    async def __call__(self, request: Request) -> Response:
        body = json.loads(request.body) if request.body else None
        self.sent.append((request.method, request.path, body))
        for prefix, answer in self.answers.items():
            if request.path.startswith(prefix):
                return answer
        return Response(204, {}, bytes_body())


def sse(*frames: str) -> Response:
    return Response(200, {"Content-Type": "text/event-stream"}, bytes_body(*(f.encode() for f in frames)))


async def test_the_1x_driver_sends_todays_calls() -> None:
    rec = Recorder({f"/api/session/{SID}/prompt": json_response(200, {"data": {"admittedSeq": 7}})})
    async with UpstreamClient("http://serve.test", transport=MockTransport(rec)) as client:
        d = Gen1Driver(client)
        admitted = await d.prompt(SID, DIR, "msg_1", "hi", "queue")
        assert await d.interrupt(SID, DIR) is None
        await d.switch_model(SID, DIR, "mock", "m2")
        await d.switch_agent(SID, DIR, "plan")
        await d.reply_permission(SID, DIR, "per_1", "always")
        await d.reply_question(SID, DIR, "que_1", [["a"]])
        await d.reply_question(SID, DIR, "que_2", None)
    assert (admitted.seq, admitted.message_id) == (7, "msg_1")
    s = f"/api/session/{SID}"
    assert rec.sent == [
        ("POST", f"{s}/prompt?{LOC}", {"id": "msg_1", "prompt": {"text": "hi"}, "delivery": "queue"}),
        ("POST", f"{s}/interrupt?{LOC}", None),
        ("POST", f"{s}/model?{LOC}", {"model": {"providerID": "mock", "id": "m2"}}),
        ("POST", f"{s}/agent?{LOC}", {"agent": "plan"}),
        ("POST", f"{s}/permission/per_1/reply?{LOC}", {"reply": "always"}),
        ("POST", f"{s}/question/que_1/reply?{LOC}", {"answers": [["a"]]}),
        ("POST", f"{s}/question/que_2/reject?{LOC}", {}),
    ]


FORM = {"id": "frm_1", "sessionID": SID, "mode": "form",
        "fields": [{"key": "pick", "type": "string"}, {"key": "many", "type": "multiselect", "options": []}]}


async def test_the_2x_driver_sends_the_calls_of_its_source() -> None:
    s = f"/api/session/{SID}"
    rec = Recorder({f"{s}/prompt": json_response(200, {"data": {"id": "msg_1", "type": "user"}}),
                    f"{s}/interrupt": json_response(200, {"interrupted": True}),
                    f"{s}/form/frm_1?": json_response(200, {"data": {"form": FORM, "state": {"status": "pending"}}})})
    async with UpstreamHttp("http://serve.test", "opencode", "pw", transport=MockTransport(rec)) as http:
        d = Gen2Driver(http)
        admitted = await d.prompt(SID, DIR, "msg_1", "hi", "steer")
        assert await d.interrupt(SID, DIR) is True
        await d.switch_model(SID, DIR, "mock", "m2")
        await d.switch_agent(SID, DIR, "plan")
        await d.reply_permission(SID, DIR, "per_1", "reject")
        await d.reply_question(SID, DIR, "frm_1", [["x"], ["a", "b"]])
        await d.reply_question(SID, DIR, "frm_2", None)
    assert (admitted.inbox_id, admitted.seq) == ("msg_1", None)
    assert rec.sent == [
        ("POST", f"{s}/prompt?{LOC}", {"id": "msg_1", "text": "hi", "delivery": "steer"}),
        ("POST", f"{s}/interrupt?{LOC}", None),
        ("POST", f"{s}/model?{LOC}", {"model": {"providerID": "mock", "id": "m2"}}),
        ("POST", f"{s}/agent?{LOC}", {"agent": "plan"}),
        ("POST", f"{s}/permission/per_1/reply?{LOC}", {"reply": "reject", "decision": "reject"}),
        ("GET", f"{s}/form/frm_1?{LOC}", None),
        ("POST", f"{s}/form/frm_1/reply?{LOC}", {"answer": {"pick": "x", "many": ["a", "b"]}}),
        ("DELETE", f"{s}/form/frm_2?{LOC}", None),
    ]


def envelope(seq: int, type_: str = "session.renamed") -> str:
    return json.dumps({"id": f"evt_{seq:03d}", "type": type_, "created": 1,
                       "durable": {"aggregateID": SID, "seq": seq, "version": 1}, "data": {"title": "t"}})


async def test_a_2x_log_read_keeps_bad_frames_skips_markers_and_ends_on_a_failure_event() -> None:
    async def handler(request: Request) -> Response:
        assert request.path == f"/api/experimental/session/{SID}/log?after=4&follow=true"
        return sse(f"data: {envelope(5)}\n\n", "data: {not json}\n\n",
                   f'data: {{"type":"log.synced","aggregateID":"{SID}","seq":5}}\n\n',
                   f"data: {envelope(6)}\n\n",
                   'event: effect/http-api/stream/failure\ndata: {"message":"boom"}\n\n')

    async with UpstreamHttp("http://serve.test", transport=MockTransport(handler)) as http:
        reads = []
        with pytest.raises(UpstreamUnavailable, match="boom"):
            async with Gen2Driver(http).follow(SID, 4) as it:
                async for read in it:
                    reads.append(read)
    assert [e.seq for r in reads for e in r.envelopes] == [5, 6]
    assert [b.reason for r in reads for b in r.bad] == ["bad_json"]


async def test_2x_hints_and_the_1x_global_stream_say_the_same() -> None:
    async def gen2(request: Request) -> Response:
        return sse('data: {"type":"log.sweep_required"}\n\n', f'data: {{"type":"log.hint","aggregateID":"{SID}",'
                   '"seq":3}\n\n', 'data: {"type":"log.hint"}\n\n', 'data: {"type":"log.hint","aggregateID":"'
                   f'{SID}","seq":4}}\n\n')

    async def gen1(request: Request) -> Response:
        twin = {"type": "sync", "id": "evt_1", "syncEvent": {"id": "evt_1", "type": "session.next.text.ended.1",
                                                             "seq": 3, "aggregateID": SID, "data": {}}}
        later = {**twin, "syncEvent": {**twin["syncEvent"], "seq": 4}}
        return sse('data: {"payload":{"id":"evt_c","type":"server.connected","properties":{}}}\n\n',
                   f"data: {json.dumps({'directory': DIR, 'payload': twin})}\n\n",
                   f"data: {json.dumps({'directory': DIR, 'payload': later})}\n\n")

    before = sample("bridge_rejects_total", reason="live_bad_shape")
    got: dict[str, list[Change]] = {}
    async with UpstreamHttp("http://serve.test", transport=MockTransport(gen2)) as http, \
            Gen2Driver(http).changes() as it:
        got["2"] = [c async for c in it]
    async with UpstreamClient("http://serve.test", transport=MockTransport(gen1)) as client, \
            Gen1Driver(client).changes() as it:
        got["1"] = [c async for c in it]
    assert got["1"] == got["2"] == [SWEEP, Change("hint", SID, 3), Change("hint", SID, 4)]
    assert sample("bridge_rejects_total", reason="live_bad_shape") == before + 1
